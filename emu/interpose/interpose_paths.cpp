// libc entry points that take a path. Paths the emulator owns (/dev/dri, /dev/udmabuf, the DRM
// sysfs nodes, and relative paths under directory fds it handed out) go to interpose/path_ops.cpp;
// everything else is one prefix check and a call through to libc.
// Built without sanitizer instrumentation and free of C++ library code: see core/fast_state.h.
// These definitions must keep libc's own symbol names: with _FILE_OFFSET_BITS=64 the headers
// would rename open to open64, stat to stat64 and so on.
#undef _FILE_OFFSET_BITS
#undef _FORTIFY_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fast_state.h"
#include "interpose/path_ops.h"
#include "interpose/real_libc.h"

using namespace rvgl::emu;

namespace {

mode_t vararg_mode(int flags, va_list ap) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE
             ? static_cast<mode_t>(va_arg(ap, int))
             : 0;
}

// Every open that may write goes through the guard: the host's /sys and /proc must never change.
bool write_intent(int flags) {
  return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC | O_APPEND));
}

int do_open(const char *path, int flags, mode_t mode) {
  if (fast::path_maybe_emulated(path) || write_intent(flags))
    return ops::open_path(path, flags, mode);
  return real::open(path, flags, mode);
}

int do_openat(int dirfd, const char *path, int flags, mode_t mode) {
  if (write_intent(flags)) return ops::open_for_write(dirfd, path, flags, mode);
  if (fast::at_path_maybe_emulated(dirfd, path)) return ops::openat_path(dirfd, path, flags, mode);
  return real::openat(dirfd, path, flags, mode);
}

// A change of the file system (not a write of file contents) that could land in the host's /sys
// or /proc or in the tree: relative paths, those two prefixes, the emulated ones, and any "..".
bool change_maybe_guarded(const char *path) {
  if (!path) return false;
  if (path[0] != '/') return true;
  if (fast::path_maybe_emulated(path) || fast::path_has_prefix(path, "/sys", true) ||
      fast::path_has_prefix(path, "/proc", true))
    return true;
  for (const char *p = path; *p; ++p)
    if (p[0] == '/' && p[1] == '.' && p[2] == '.') return true;
  return false;
}

int guarded(int dirfd, const char *path, bool follow) {
  return change_maybe_guarded(path) ? ops::guard_change(dirfd, path, follow) : 0;
}

int do_stat(const char *path, struct stat *st, bool follow) {
  if (fast::path_maybe_emulated(path)) return ops::stat_path(path, st, follow);
  return follow ? real::stat(path, st) : real::lstat(path, st);
}

int do_fstat(int fd, struct stat *st) {
  if (fast::fd_maybe_ours(fd)) return ops::fstat_fd(fd, st);
  return real::fstat(fd, st);
}

int do_fstatat(int dirfd, const char *path, struct stat *st, int flags) {
  if (fast::at_path_maybe_emulated(dirfd, path)) return ops::fstatat_path(dirfd, path, st, flags);
  return real::fstatat(dirfd, path, st, flags);
}

// /proc/self/fd/N where N may be an emulator fd (readlink of it names the device).
bool own_fd_link(const char *path) {
  if (!path || !fast::path_has_prefix(path, "/proc/self/fd/", false)) return false;
  long fd = 0;
  const char *p = path + 14;
  if (*p == '\0') return false;
  for (; *p; ++p) {
    if (*p < '0' || *p > '9' || fd > (1L << 31)) return false;
    fd = fd * 10 + (*p - '0');
  }
  return fd < (1L << 31) && fast::fd_maybe_ours(static_cast<int>(fd));
}

ssize_t do_readlink(const char *path, char *buf, size_t size) {
  if (fast::path_maybe_emulated(path) || own_fd_link(path))
    return ops::readlink_path(path, buf, size);
  return real::readlink(path, buf, size);
}

// Not inlined: glibc declares readlinkat's path nonnull, callers may still pass null.
__attribute__((noinline)) ssize_t do_readlinkat(int dirfd, const char *path, char *buf,
                                                size_t size) {
  if (path && path[0] == '/') return do_readlink(path, buf, size);
  if (fast::fd_maybe_ours(dirfd)) return ops::readlinkat_path(dirfd, path, buf, size);
  return real::readlinkat(dirfd, path, buf, size);
}

char *do_realpath(const char *path, char *resolved) {
  if (fast::path_maybe_emulated(path)) return ops::realpath_path(path, resolved);
  return real::realpath(path, resolved);
}

int do_access(const char *path, int mode) {
  if (fast::path_maybe_emulated(path)) return ops::access_path(path, mode);
  return real::access(path, mode);
}

// A loop, not strchr: see path_has_prefix.
bool fopen_mode_writes(const char *mode) {
  for (; mode && *mode; ++mode)
    if (*mode == 'w' || *mode == 'a' || *mode == '+') return true;
  return false;
}

FILE *do_fopen(const char *path, const char *mode) {
  if (fast::path_maybe_emulated(path)) return ops::fopen_path(path, mode);
  if (fopen_mode_writes(mode)) return ops::fopen_for_write(path, mode);
  return real::fopen(path, mode);
}

bool dri_dirs_open() {
  return __atomic_load_n(&fast::g_dri_dirs, __ATOMIC_ACQUIRE) != 0;
}

}  // namespace

extern "C" {

int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
int __xstat(int ver, const char *path, struct stat *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __fxstat(int ver, int fd, struct stat *st);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
int __xstat64(int ver, const char *path, struct stat64 *st);
int __lxstat64(int ver, const char *path, struct stat64 *st);
int __fxstat64(int ver, int fd, struct stat64 *st);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags);
char *__realpath_chk(const char *path, char *resolved, size_t resolvedlen);

int open(const char *path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = vararg_mode(flags, ap);
  va_end(ap);
  return do_open(path, flags, mode);
}

int open64(const char *path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = vararg_mode(flags, ap);
  va_end(ap);
  return do_open(path, flags, mode);
}

int __open_2(const char *path, int flags) {
  return do_open(path, flags, 0);
}
int __open64_2(const char *path, int flags) {
  return do_open(path, flags, 0);
}

int openat(int dirfd, const char *path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = vararg_mode(flags, ap);
  va_end(ap);
  return do_openat(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = vararg_mode(flags, ap);
  va_end(ap);
  return do_openat(dirfd, path, flags, mode);
}

int __openat_2(int dirfd, const char *path, int flags) {
  return do_openat(dirfd, path, flags, 0);
}
int __openat64_2(int dirfd, const char *path, int flags) {
  return do_openat(dirfd, path, flags, 0);
}

int stat(const char *path, struct stat *st) noexcept {
  return do_stat(path, st, true);
}
int stat64(const char *path, struct stat64 *st) noexcept {
  return do_stat(path, reinterpret_cast<struct stat *>(st), true);
}
int lstat(const char *path, struct stat *st) noexcept {
  return do_stat(path, st, false);
}
int lstat64(const char *path, struct stat64 *st) noexcept {
  return do_stat(path, reinterpret_cast<struct stat *>(st), false);
}
int fstat(int fd, struct stat *st) noexcept {
  return do_fstat(fd, st);
}
int fstat64(int fd, struct stat64 *st) noexcept {
  return do_fstat(fd, reinterpret_cast<struct stat *>(st));
}
int fstatat(int dirfd, const char *path, struct stat *st, int flags) noexcept {
  return do_fstatat(dirfd, path, st, flags);
}
int fstatat64(int dirfd, const char *path, struct stat64 *st, int flags) noexcept {
  return do_fstatat(dirfd, path, reinterpret_cast<struct stat *>(st), flags);
}

// The pre-2.33 glibc entry points, for binaries built against an older glibc.
int __xstat(int, const char *path, struct stat *st) {
  return do_stat(path, st, true);
}
int __lxstat(int, const char *path, struct stat *st) {
  return do_stat(path, st, false);
}
int __fxstat(int, int fd, struct stat *st) {
  return do_fstat(fd, st);
}
int __fxstatat(int, int dirfd, const char *path, struct stat *st, int flags) {
  return do_fstatat(dirfd, path, st, flags);
}
int __xstat64(int, const char *path, struct stat64 *st) {
  return do_stat(path, reinterpret_cast<struct stat *>(st), true);
}
int __lxstat64(int, const char *path, struct stat64 *st) {
  return do_stat(path, reinterpret_cast<struct stat *>(st), false);
}
int __fxstat64(int, int fd, struct stat64 *st) {
  return do_fstat(fd, reinterpret_cast<struct stat *>(st));
}
int __fxstatat64(int, int dirfd, const char *path, struct stat64 *st, int flags) {
  return do_fstatat(dirfd, path, reinterpret_cast<struct stat *>(st), flags);
}

int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *stx) noexcept {
  if (fast::at_path_maybe_emulated(dirfd, path))
    return ops::statx_path(dirfd, path, flags, mask, stx);
  return real::statx(dirfd, path, flags, mask, stx);
}

ssize_t readlink(const char *path, char *buf, size_t size) noexcept {
  return do_readlink(path, buf, size);
}

ssize_t readlinkat(int dirfd, const char *path, char *buf, size_t size) noexcept {
  return do_readlinkat(dirfd, path, buf, size);
}

char *realpath(const char *path, char *resolved) noexcept {
  return do_realpath(path, resolved);
}
char *__realpath_chk(const char *path, char *resolved, size_t) {
  return do_realpath(path, resolved);
}
char *canonicalize_file_name(const char *path) noexcept {
  return do_realpath(path, nullptr);
}

int access(const char *path, int mode) noexcept {
  return do_access(path, mode);
}
int euidaccess(const char *path, int mode) noexcept {
  return do_access(path, mode);
}
int eaccess(const char *path, int mode) noexcept {
  return do_access(path, mode);
}
int faccessat(int dirfd, const char *path, int mode, int flags) noexcept {
  if (fast::at_path_maybe_emulated(dirfd, path))
    return ops::faccessat_path(dirfd, path, mode, flags);
  return real::faccessat(dirfd, path, mode, flags);
}

DIR *opendir(const char *path) {
  if (fast::path_maybe_emulated(path)) return ops::opendir_path(path);
  return real::opendir(path);
}

int closedir(DIR *d) {
  if (dri_dirs_open()) ops::forget_dir(d);
  return real::closedir(d);
}

struct dirent *readdir(DIR *d) {
  struct dirent *e = real::readdir(d);
  if (e && dri_dirs_open()) ops::fix_dirent_type(d, e->d_name, &e->d_type);
  return e;
}

struct dirent64 *readdir64(DIR *d) {
  struct dirent64 *e = real::readdir64(d);
  if (e && dri_dirs_open()) ops::fix_dirent_type(d, e->d_name, &e->d_type);
  return e;
}

FILE *fopen(const char *path, const char *mode) {
  return do_fopen(path, mode);
}

FILE *fopen64(const char *path, const char *mode) {
  return do_fopen(path, mode);
}

int creat(const char *path, mode_t mode) {
  return do_open(path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}
int creat64(const char *path, mode_t mode) {
  return do_open(path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

int truncate(const char *path, off_t len) noexcept {
  if (guarded(AT_FDCWD, path, true)) return -1;
  return real::truncate(path, len);
}
int truncate64(const char *path, off64_t len) noexcept {
  if (guarded(AT_FDCWD, path, true)) return -1;
  return real::truncate(path, static_cast<off_t>(len));
}

int mkdir(const char *path, mode_t mode) noexcept {
  if (guarded(AT_FDCWD, path, false)) return -1;
  return real::mkdirat(AT_FDCWD, path, mode);
}
int mkdirat(int dirfd, const char *path, mode_t mode) noexcept {
  if (guarded(dirfd, path, false)) return -1;
  return real::mkdirat(dirfd, path, mode);
}
int rmdir(const char *path) noexcept {
  if (guarded(AT_FDCWD, path, false)) return -1;
  return real::unlinkat(AT_FDCWD, path, AT_REMOVEDIR);
}
int unlink(const char *path) noexcept {
  if (guarded(AT_FDCWD, path, false)) return -1;
  return real::unlinkat(AT_FDCWD, path, 0);
}
int unlinkat(int dirfd, const char *path, int flags) noexcept {
  if (guarded(dirfd, path, false)) return -1;
  return real::unlinkat(dirfd, path, flags);
}
int rename(const char *from, const char *to) noexcept {
  if (guarded(AT_FDCWD, from, false) || guarded(AT_FDCWD, to, false)) return -1;
  return real::renameat(AT_FDCWD, from, AT_FDCWD, to);
}
int renameat(int fromfd, const char *from, int tofd, const char *to) noexcept {
  if (guarded(fromfd, from, false) || guarded(tofd, to, false)) return -1;
  return real::renameat(fromfd, from, tofd, to);
}
int chmod(const char *path, mode_t mode) noexcept {
  if (guarded(AT_FDCWD, path, true)) return -1;
  return real::fchmodat(AT_FDCWD, path, mode, 0);
}
int fchmodat(int dirfd, const char *path, mode_t mode, int flags) noexcept {
  if (guarded(dirfd, path, !(flags & AT_SYMLINK_NOFOLLOW))) return -1;
  return real::fchmodat(dirfd, path, mode, flags);
}
int chown(const char *path, uid_t uid, gid_t gid) noexcept {
  if (guarded(AT_FDCWD, path, true)) return -1;
  return real::fchownat(AT_FDCWD, path, uid, gid, 0);
}
int lchown(const char *path, uid_t uid, gid_t gid) noexcept {
  if (guarded(AT_FDCWD, path, false)) return -1;
  return real::fchownat(AT_FDCWD, path, uid, gid, AT_SYMLINK_NOFOLLOW);
}
int fchownat(int dirfd, const char *path, uid_t uid, gid_t gid, int flags) noexcept {
  if (guarded(dirfd, path, !(flags & AT_SYMLINK_NOFOLLOW))) return -1;
  return real::fchownat(dirfd, path, uid, gid, flags);
}

ssize_t getxattr(const char *path, const char *name, void *value, size_t size) noexcept {
  if (fast::path_maybe_emulated(path)) return ops::getxattr_path(path, name, value, size, true);
  return real::getxattr(path, name, value, size);
}
ssize_t lgetxattr(const char *path, const char *name, void *value, size_t size) noexcept {
  if (fast::path_maybe_emulated(path)) return ops::getxattr_path(path, name, value, size, false);
  return real::lgetxattr(path, name, value, size);
}
ssize_t listxattr(const char *path, char *list, size_t size) noexcept {
  if (fast::path_maybe_emulated(path)) return ops::listxattr_path(path, list, size, true);
  return real::listxattr(path, list, size);
}
ssize_t llistxattr(const char *path, char *list, size_t size) noexcept {
  if (fast::path_maybe_emulated(path)) return ops::listxattr_path(path, list, size, false);
  return real::llistxattr(path, list, size);
}

}  // extern "C"
