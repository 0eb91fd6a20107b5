#include "util/user_memory.h"

#include <pthread.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "util/self_pid.h"

namespace rvgl::emu {

namespace {

// Some sandboxes forbid process_vm_*; then the emulator trusts pointers it cannot check.
std::atomic<bool> g_pvm_unavailable{false};

// This thread's stack, [lo, hi), read once per thread. Everything between the current stack
// pointer and hi is mapped and writable for as long as this call runs, so an argument there (libdrm
// keeps every ioctl struct on its caller's stack) needs no checked copy: the cheap way the kernel's
// cost model asks for, with EFAULT kept for every other address.
struct StackRange {
  uintptr_t lo = 0, hi = 0;
  bool known = false;
};
thread_local StackRange t_stack;

const StackRange &this_stack() {
  StackRange &s = t_stack;
  if (!s.known) {
    s.known = true;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void *addr = nullptr;
      size_t size = 0;
      if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
        s.lo = reinterpret_cast<uintptr_t>(addr);
        s.hi = s.lo + size;
      }
      pthread_attr_destroy(&attr);
    }
  }
  return s;
}

// The bound CallerStackScope set on this thread (0: none, e.g. a GPU worker).
thread_local uintptr_t t_caller_frame = 0;

// Whether [addr, addr+len) lies in the caller's live stack. Not when the caller runs on an
// alternate signal stack or a user-level coroutine stack (its frame is outside the thread's
// stack): those fall back to the checked copy.
bool on_live_stack(uint64_t addr, size_t len) {
  const uintptr_t bound = t_caller_frame;
  if (!bound) return false;
  const StackRange &s = this_stack();
  if (bound < s.lo || bound >= s.hi) return false;
  return addr >= bound && addr < s.hi && len <= s.hi - addr;
}

// The copy for the stack case: the range is mapped, but may span the caller's objects and a
// sanitizer's redzones between them, which the kernel would copy without a word; so no
// instrumentation, and volatile accesses so the compiler cannot turn the loop into a memcpy call
// (which a sanitizer intercepts).
__attribute__((no_sanitize("address", "thread", "undefined"))) void copy_unchecked(void *dst,
                                                                                   const void *src,
                                                                                   size_t len) {
  auto *d = static_cast<unsigned char *>(dst);
  const auto *s = static_cast<const unsigned char *>(src);
  size_t i = 0;
  // Word by word, as the kernel's copy_from_user() moves a small struct (x86 allows the
  // unaligned accesses); a byte loop made every ioctl argument cost a few hundred instructions.
  for (; i + sizeof(uint64_t) <= len; i += sizeof(uint64_t))
    *reinterpret_cast<volatile uint64_t *>(d + i) =
        *reinterpret_cast<const volatile uint64_t *>(s + i);
  for (; i < len; ++i)
    static_cast<volatile unsigned char *>(dst)[i] = s[i];
}

// Transfers in pieces the syscall accepts (it may return short on large requests).
int transfer(uint64_t local, uint64_t remote, size_t len, bool write) {
  const pid_t self = self_pid();
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

CallerStackScope::CallerStackScope(const void *caller_frame) : previous_(t_caller_frame) {
  t_caller_frame = reinterpret_cast<uintptr_t>(caller_frame);
}

CallerStackScope::~CallerStackScope() {
  t_caller_frame = previous_;
}

int copy_from_user(void *dst, uint64_t user_src, size_t len) {
  if (len == 0) return 0;
  if (user_src == 0) return -EFAULT;
  if (on_live_stack(user_src, len)) {
    copy_unchecked(dst, reinterpret_cast<const void *>(user_src), len);
    return 0;
  }
  return transfer(reinterpret_cast<uint64_t>(dst), user_src, len, false);
}

int copy_to_user(uint64_t user_dst, const void *src, size_t len) {
  if (len == 0) return 0;
  if (user_dst == 0) return -EFAULT;
  if (on_live_stack(user_dst, len)) {
    copy_unchecked(reinterpret_cast<void *>(user_dst), src, len);
    return 0;
  }
  return transfer(reinterpret_cast<uint64_t>(src), user_dst, len, true);
}

int copy_user_to_user(uint64_t user_dst, uint64_t user_src, size_t len) {
  if (len == 0) return 0;
  if (user_dst == 0 || user_src == 0) return -EFAULT;
  // process_vm_readv checks both sides: the local iovec is written with the caller's rights.
  return transfer(user_dst, user_src, len, false);
}

}  // namespace rvgl::emu
