#include "util/user_memory.h"

#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

namespace rvgl::emu {

namespace {

// Some sandboxes forbid process_vm_*; then the emulator trusts pointers it cannot check.
std::atomic<bool> g_pvm_unavailable{false};

// Transfers in pieces the syscall accepts (it may return short on large requests).
int transfer(uint64_t local, uint64_t remote, size_t len, bool write) {
  const pid_t self = getpid();
  while (len > 0) {
    if (g_pvm_unavailable.load(std::memory_order_relaxed)) {
      if (write)
        std::memmove(reinterpret_cast<void *>(remote), reinterpret_cast<void *>(local), len);
      else
        std::memmove(reinterpret_cast<void *>(local), reinterpret_cast<void *>(remote), len);
      return 0;
    }
    iovec l{reinterpret_cast<void *>(local), len};
    iovec r{reinterpret_cast<void *>(remote), len};
    const ssize_t n =
        write ? process_vm_writev(self, &l, 1, &r, 1, 0) : process_vm_readv(self, &l, 1, &r, 1, 0);
    if (n < 0) {
      if (errno == ENOSYS || errno == EPERM) {
        g_pvm_unavailable.store(true, std::memory_order_relaxed);
        continue;
      }
      return -EFAULT;
    }
    if (n == 0) return -EFAULT;
    local += static_cast<uint64_t>(n);
    remote += static_cast<uint64_t>(n);
    len -= static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

int copy_from_user(void *dst, uint64_t user_src, size_t len) {
  if (len == 0) return 0;
  if (user_src == 0) return -EFAULT;
  return transfer(reinterpret_cast<uint64_t>(dst), user_src, len, false);
}

int copy_to_user(uint64_t user_dst, const void *src, size_t len) {
  if (len == 0) return 0;
  if (user_dst == 0) return -EFAULT;
  return transfer(reinterpret_cast<uint64_t>(src), user_dst, len, true);
}

int copy_user_to_user(uint64_t user_dst, uint64_t user_src, size_t len) {
  if (len == 0) return 0;
  if (user_dst == 0 || user_src == 0) return -EFAULT;
  // process_vm_readv checks both sides: the local iovec is written with the caller's rights.
  return transfer(user_dst, user_src, len, false);
}

bool user_range_mapped(uint64_t addr, size_t len) {
  if (len == 0) return true;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t start = addr & ~(page - 1);
  if (addr + len < addr) return false;
  const uint64_t end = (addr + len + page - 1) & ~(page - 1);
  // mincore fails with ENOMEM on any unmapped page in the range; its vector is one byte per page.
  const uint64_t pages = (end - start) / page;
  std::vector<unsigned char> vec(static_cast<size_t>(std::min<uint64_t>(pages, 4096)));
  for (uint64_t at = start; at < end;) {
    const uint64_t chunk = std::min<uint64_t>(end - at, vec.size() * page);
    if (mincore(reinterpret_cast<void *>(at), chunk, vec.data()) != 0) return false;
    at += chunk;
  }
  return true;
}

}  // namespace rvgl::emu
