#include "util/proc_maps.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "amdgpu/uapi/procmap_query_uapi.h"
#include "interpose/real_libc.h"
#include "util/unique_fd.h"

namespace rvgl::emu {

namespace {

// PROCMAP_QUERY (amdgpu/uapi/procmap_query_uapi.h): one VMA looked up by address, as the kernel's
// own VMA walk does, whatever the size of the map.
using ProcmapQuery = uapi::ProcmapQueryArg;
using uapi::kProcmapQuery;
using uapi::kVmaReadable;
using uapi::kVmaWritable;

std::atomic<bool> g_no_procmap_query{false};

// 1: done (out filled), 0: the kernel has no PROCMAP_QUERY, -1: /proc/self/maps unreadable.
int query_vmas(uint64_t addr, uint64_t len, std::vector<Vma> &out) {
  // Opened per call: a cached fd could be closed behind our back, or be the parent's after fork.
  UniqueFd fd(real::open("/proc/self/maps", O_RDONLY | O_CLOEXEC, 0));
  if (!fd) return -1;
  const uint64_t end = addr + len;
  for (uint64_t at = addr; at < end;) {
    ProcmapQuery q{};
    q.size = sizeof(q);
    q.query_addr = at;  // the VMA covering `at`, or ENOENT
    if (real::ioctl(fd.get(), kProcmapQuery, &q) != 0) {
      if (errno == ENOENT) return 1;  // a hole: the caller sees the gap
      if (errno == ENOTTY || errno == EINVAL) {
        g_no_procmap_query.store(true, std::memory_order_relaxed);
        return 0;
      }
      return -1;
    }
    out.push_back(Vma{q.vma_start, q.vma_end, (q.vma_flags & kVmaReadable) != 0,
                      (q.vma_flags & kVmaWritable) != 0, q.inode != 0});
    at = q.vma_end;
  }
  return 1;
}

}  // namespace

bool vmas_overlapping(uint64_t addr, uint64_t len, std::vector<Vma> &out) {
  out.clear();
  if (!g_no_procmap_query.load(std::memory_order_relaxed)) {
    const int r = query_vmas(addr, len, out);
    if (r != 0) return r > 0;
    out.clear();
  }
  // Older kernels: parse the text.
  const int fd = real::open("/proc/self/maps", O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return false;
  std::string text;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0)
    text.append(buf, static_cast<size_t>(n));
  real::close(fd);
  const uint64_t end = addr + len;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    const char *line = text.c_str() + pos;
    // "start-end perms offset dev inode [path]"
    char *p;
    const uint64_t s = std::strtoull(line, &p, 16);
    const uint64_t e = std::strtoull(p + 1, &p, 16);
    if (e > addr && s < end) {
      Vma v{s, e, p[1] == 'r', p[2] == 'w', false};
      p += 5;
      std::strtoull(p, &p, 16);  // offset
      while (*p == ' ')
        ++p;
      while (*p && *p != ' ')
        ++p;  // dev
      const uint64_t inode = std::strtoull(p, &p, 10);
      v.file_backed = inode != 0;
      out.push_back(v);
    }
    if (s >= end) break;
    pos = eol + 1;
  }
  return true;
}

int user_pages_error(uint64_t addr, uint64_t len, bool readonly, bool anon_only) {
  std::vector<Vma> vmas;
  if (!vmas_overlapping(addr, len, vmas)) return -EFAULT;
  uint64_t at = addr;
  for (const Vma &v : vmas) {
    if (v.start > at) return -EFAULT;
    if (anon_only && v.file_backed) return -EPERM;
    if (!v.readable) return -EFAULT;
    if (!readonly && !v.writable) return -EPERM;
    at = v.end;
    if (at >= addr + len) break;
  }
  return at < addr + len ? -EFAULT : 0;
}

}  // namespace rvgl::emu
