// libc entry points that take an fd. For any fd the emulator did not hand out these are one check
// of a byte map and a call through to libc; the emulator's fds go to interpose/fd_ops.cpp.
// Built without sanitizer instrumentation and free of C++ library code: see core/fast_state.h.
// These definitions must keep libc's own symbol names: with _FILE_OFFSET_BITS=64 the headers
// would rename open to open64, stat to stat64 and so on.
#undef _FILE_OFFSET_BITS
#undef _FORTIFY_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/fast_state.h"
#include "interpose/fd_ops.h"
#include "interpose/real_libc.h"

using namespace rvgl::emu;

namespace {

void track_duplicate(int from, int to) {
  if (fast::fd_maybe_ours(from) || fast::fd_maybe_ours(to)) ops::retrack_fd(from, to);
}

void *do_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  if (fast::fd_maybe_ours(fd)) return ops::mmap_fd(addr, len, prot, flags, fd, off);
  return real::mmap(addr, len, prot, flags, fd, off);
}

int do_fcntl(int fd, int cmd, void *arg) {
  const int r = real::fcntl(fd, cmd, arg);
  if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)) track_duplicate(fd, r);
  return r;
}

}  // namespace

extern "C" {

int close(int fd) {
  if (fast::fd_maybe_ours(fd)) return ops::close_fd(fd);
  return real::close(fd);
}

int close_range(unsigned first, unsigned last, int flags) noexcept {
  if (fast::instance()) return ops::close_fd_range(first, last, flags);
  return real::close_range(first, last, flags);
}

int dup(int fd) noexcept {
  const int r = real::dup(fd);
  if (r >= 0) track_duplicate(fd, r);
  return r;
}

int dup2(int fd, int to) noexcept {
  if (fd != to && fast::fd_maybe_ours(to)) ops::before_replace(to);
  const int r = real::dup2(fd, to);
  if (r >= 0 && fd != to) track_duplicate(fd, to);
  return r;
}

int dup3(int fd, int to, int flags) noexcept {
  if (fd != to && fast::fd_maybe_ours(to)) ops::before_replace(to);
  const int r = real::dup3(fd, to, flags);
  if (r >= 0) track_duplicate(fd, to);
  return r;
}

int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void *arg = va_arg(ap, void *);
  va_end(ap);
  return do_fcntl(fd, cmd, arg);
}

int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void *arg = va_arg(ap, void *);
  va_end(ap);
  return do_fcntl(fd, cmd, arg);
}

int ioctl(int fd, unsigned long request, ...) noexcept {
  va_list ap;
  va_start(ap, request);
  void *arg = va_arg(ap, void *);
  va_end(ap);
  if (fast::fd_maybe_ours(fd)) return ops::ioctl_fd(fd, request, arg, __builtin_frame_address(0));
  return real::ioctl(fd, request, arg);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) noexcept {
  return do_mmap(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off) noexcept {
  return do_mmap(addr, len, prot, flags, fd, static_cast<off_t>(off));
}

}  // extern "C"
