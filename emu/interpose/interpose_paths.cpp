// libc entry points that take a path. Paths the emulator owns (/dev/dri, /dev/udmabuf, the DRM
// sysfs nodes) are rewritten into the fake tree; device nodes open as emulated files and stat as
// character devices. Everything else passes straight through.
// These definitions must keep libc's own symbol names: with _FILE_OFFSET_BITS=64 the headers
// would rename open to open64, stat to stat64 and so on.
#undef _FILE_OFFSET_BITS
#undef _FORTIFY_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <string>
#include <vector>

#include "core/emulator.h"
#include "interpose/emulated_paths.h"
#include "interpose/real_libc.h"

using namespace rvgl::emu;

namespace {

// DIR streams opened on the tree's /dev/dri: their node entries are reported as DT_CHR.
std::mutex g_dirs_mu;
std::vector<DIR *> g_dri_dirs;

bool is_dri_dir(DIR *d) {
  std::lock_guard lk(g_dirs_mu);
  return std::find(g_dri_dirs.begin(), g_dri_dirs.end(), d) != g_dri_dirs.end();
}

bool node_entry_name(const char *name) {
  return strncmp(name, "card", 4) == 0 || strncmp(name, "renderD", 7) == 0;
}

int do_open(const char *path, int flags, mode_t mode) {
  std::string real_path;
  if (!rewrite_path(path, real_path)) return real::open(path, flags, mode);
  if (NodeRef node = node_at_rewritten(real_path)) return open_node(node, real_path, flags);
  // The tree is ours, not the caller's: nothing gets created in it.
  const int fd = real::open(real_path.c_str(), flags & ~(O_CREAT | O_TRUNC), mode);
  struct stat st;
  if (fd >= 0 && real::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) track_tree_dir(fd, path);
  return fd;
}

int do_openat(int dirfd, const char *path, int flags, mode_t mode) {
  if (path && path[0] == '/') return do_open(path, flags, mode);
  std::string pub;
  if (resolve_at(dirfd, path, pub)) return do_open(pub.c_str(), flags, mode);
  return real::openat(dirfd, path, flags, mode);
}

mode_t vararg_mode(int flags, va_list ap) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE
             ? static_cast<mode_t>(va_arg(ap, int))
             : 0;
}

int do_stat(const char *path, struct stat *st, bool follow) {
  std::string real_path;
  if (!rewrite_path(path, real_path)) return follow ? real::stat(path, st) : real::lstat(path, st);
  const int r = follow ? real::stat(real_path.c_str(), st) : real::lstat(real_path.c_str(), st);
  if (r == 0 && S_ISREG(st->st_mode))
    if (NodeRef node = node_at_rewritten(real_path)) fake_node_stat(node, *st);
  return r;
}

int do_fstat(int fd, struct stat *st) {
  const int r = real::fstat(fd, st);
  if (r == 0)
    if (NodeRef node = node_of_fd(fd)) fake_node_stat(node, *st);
  return r;
}

int do_fstatat(int dirfd, const char *path, struct stat *st, int flags) {
  if (path && path[0] == '/') return do_stat(path, st, !(flags & AT_SYMLINK_NOFOLLOW));
  std::string pub;
  if (resolve_at(dirfd, path, pub)) return do_stat(pub.c_str(), st, !(flags & AT_SYMLINK_NOFOLLOW));
  if (path && path[0] == '\0' && (flags & AT_EMPTY_PATH)) {
    const int r = real::fstatat(dirfd, path, st, flags);
    if (r == 0)
      if (NodeRef node = node_of_fd(dirfd)) fake_node_stat(node, *st);
    return r;
  }
  return real::fstatat(dirfd, path, st, flags);
}

ssize_t do_readlink(const char *path, char *buf, size_t size) {
  // /proc/self/fd/N of a device fd names the device, as it would on a real system.
  if (path && strncmp(path, "/proc/self/fd/", 14) == 0) {
    char *end;
    const long fd = strtol(path + 14, &end, 10);
    if (*end == '\0' && fd >= 0 && fd < INT_MAX)
      if (NodeRef node = node_of_fd(static_cast<int>(fd))) {
        const std::string name = node_public_path(node);
        const size_t n = std::min(size, name.size());
        memcpy(buf, name.data(), n);
        return static_cast<ssize_t>(n);
      }
  }
  std::string real_path;
  if (!rewrite_path(path, real_path)) return real::readlink(path, buf, size);
  return real::readlink(real_path.c_str(), buf, size);
}

char *do_realpath(const char *path, char *resolved) {
  std::string real_path;
  if (!rewrite_path(path, real_path)) return real::realpath(path, resolved);
  char buf[PATH_MAX];
  if (!real::realpath(real_path.c_str(), buf)) return nullptr;
  std::string pub;
  Emulator &e = Emulator::get();
  {
    std::lock_guard lk(e.mutex());
    FakeTree *t = e.tree_locked();
    if (!t || !t->to_public(buf, pub)) pub = buf;
  }
  if (pub.size() >= PATH_MAX) {
    errno = ENAMETOOLONG;
    return nullptr;
  }
  if (!resolved) return strdup(pub.c_str());
  memcpy(resolved, pub.c_str(), pub.size() + 1);
  return resolved;
}

int do_access(const char *path, int mode) {
  std::string real_path;
  if (!rewrite_path(path, real_path)) return real::access(path, mode);
  return real::access(real_path.c_str(), mode);
}

__attribute__((noinline)) int do_statx(int dirfd, const char *path, int flags, unsigned mask,
                                       struct statx *stx) {
  NodeRef node;
  int r;
  std::string real_path;
  std::string pub;
  if (resolve_at(dirfd, path, pub)) path = pub.c_str();
  if (path && path[0] == '/' && rewrite_path(path, real_path)) {
    r = real::statx(dirfd, real_path.c_str(), flags, mask, stx);
    if (r == 0 && S_ISREG(stx->stx_mode)) node = node_at_rewritten(real_path);
  } else {
    r = real::statx(dirfd, path, flags, mask, stx);
    if (r == 0 && path && path[0] == '\0' && (flags & AT_EMPTY_PATH)) node = node_of_fd(dirfd);
  }
  if (node) fake_node_statx(node, *stx);
  return r;
}

__attribute__((noinline)) ssize_t do_readlinkat(int dirfd, const char *path, char *buf,
                                                size_t size) {
  if (path && path[0] == '/') return do_readlink(path, buf, size);
  std::string pub;
  if (resolve_at(dirfd, path, pub)) return do_readlink(pub.c_str(), buf, size);
  return real::readlinkat(dirfd, path, buf, size);
}

__attribute__((noinline)) int do_faccessat(int dirfd, const char *path, int mode, int flags) {
  std::string pub;
  if (resolve_at(dirfd, path, pub)) path = pub.c_str();
  std::string real_path;
  if (path && path[0] == '/' && rewrite_path(path, real_path))
    return real::faccessat(dirfd, real_path.c_str(), mode, flags);
  return real::faccessat(dirfd, path, mode, flags);
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
  return do_statx(dirfd, path, flags, mask, stx);
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
  return do_faccessat(dirfd, path, mode, flags);
}

DIR *opendir(const char *path) {
  std::string real_path;
  if (!rewrite_path(path, real_path)) return real::opendir(path);
  DIR *d = real::opendir(real_path.c_str());
  if (d) {
    bool dri = false;
    Emulator &e = Emulator::get();
    {
      std::lock_guard lk(e.mutex());
      FakeTree *t = e.tree_locked();
      dri = t && t->is_dri_dir(real_path);
    }
    if (dri) {
      std::lock_guard lk(g_dirs_mu);
      g_dri_dirs.push_back(d);
    }
  }
  return d;
}

int closedir(DIR *d) {
  {
    std::lock_guard lk(g_dirs_mu);
    std::erase(g_dri_dirs, d);
  }
  return real::closedir(d);
}

struct dirent *readdir(DIR *d) {
  struct dirent *e = real::readdir(d);
  if (e && node_entry_name(e->d_name) && is_dri_dir(d)) e->d_type = DT_CHR;
  return e;
}

struct dirent64 *readdir64(DIR *d) {
  struct dirent64 *e = real::readdir64(d);
  if (e && node_entry_name(e->d_name) && is_dri_dir(d)) e->d_type = DT_CHR;
  return e;
}

FILE *fopen(const char *path, const char *mode) {
  std::string real_path;
  if (!rewrite_path(path, real_path)) return real::fopen(path, mode);
  return real::fopen(real_path.c_str(), mode);
}

FILE *fopen64(const char *path, const char *mode) {
  std::string real_path;
  if (!rewrite_path(path, real_path)) return real::fopen(path, mode);
  return real::fopen(real_path.c_str(), mode);
}

}  // extern "C"
