// Whether two fds of this process name one open file (one struct file: dup'ed fds do), by kcmp(2)
// KCMP_FILE (linux/kcmp.h): a VMM's DRM fd that is another context's, or the VMM's own.
#pragma once

#include <linux/kcmp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace rvgl {

// 1: the same open file, 0: not, -errno: cannot tell (kcmp not built, or refused). `self` is
// this process's pid, for a caller that keeps it (one system call, not two).
inline int same_open_file(pid_t self, int a, int b) {
  const long r = syscall(SYS_kcmp, self, self, KCMP_FILE, a, b);
  if (r < 0) return -errno;
  return r == 0 ? 1 : 0;
}

inline int same_open_file(int a, int b) {
  return same_open_file(getpid(), a, b);
}

// Whether any other fd of this process names the open file `fd` names (a dup someone kept):
// 1 yes, 0 no, -errno when that cannot be told (kcmp refused; no /proc/self/fd and a soft
// RLIMIT_NOFILE above kMaxNumbersAsked). Reads /proc/self/fd: one kcmp per open fd; without it,
// one per fd number below the soft limit (open_file_named_below).
int open_file_named_elsewhere(int fd);
constexpr unsigned kMaxNumbersAsked = 65536;
// The same over the fd numbers [0, limit) only.
int open_file_named_below(int fd, int limit);

}  // namespace rvgl
