#include "interpose/path_ops.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <string>
#include <vector>

#include "core/emulator.h"
#include "core/fast_state.h"
#include "interpose/emulated_paths.h"
#include "interpose/real_libc.h"

namespace rvgl::emu::ops {

namespace {

// DIR streams opened on the tree's /dev/dri: their node entries are reported as DT_CHR.
// fast::g_dri_dirs mirrors the count, so readdir of any other stream needs no lock.
std::mutex g_dirs_mu;
std::vector<DIR *> g_dri_dirs;

bool is_dri_dir(DIR *d) {
  std::lock_guard lk(g_dirs_mu);
  return std::find(g_dri_dirs.begin(), g_dri_dirs.end(), d) != g_dri_dirs.end();
}

bool node_entry_name(const char *name) {
  return strncmp(name, "card", 4) == 0 || strncmp(name, "renderD", 7) == 0;
}

// /proc/self/fd/N of a device fd names the device, as it would on a real system. -1: not one.
ssize_t readlink_own_fd(const char *path, char *buf, size_t size) {
  if (!path || strncmp(path, "/proc/self/fd/", 14) != 0) return -1;
  char *end;
  const long fd = strtol(path + 14, &end, 10);
  if (*end != '\0' || fd < 0 || fd >= INT_MAX) return -1;
  NodeRef node = node_of_fd(static_cast<int>(fd));
  if (!node) return -1;
  const std::string name = node_public_path(node);
  const size_t n = std::min(size, name.size());
  memcpy(buf, name.data(), n);
  return static_cast<ssize_t>(n);
}

}  // namespace

int open_path(const char *path, int flags, mode_t mode) {
  std::string real_path;
  if (!rewrite_path(path, real_path)) return real::open(path, flags, mode);
  if (NodeRef node = node_at_rewritten(real_path)) return open_node(node, real_path, flags);
  // The tree is ours, not the caller's: nothing gets created in it.
  const int fd = real::open(real_path.c_str(), flags & ~(O_CREAT | O_TRUNC), mode);
  struct stat st;
  if (fd >= 0 && real::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) track_tree_dir(fd, path);
  return fd;
}

int openat_path(int dirfd, const char *path, int flags, mode_t mode) {
  if (path && path[0] == '/') return open_path(path, flags, mode);
  std::string pub;
  if (resolve_at(dirfd, path, pub)) return open_path(pub.c_str(), flags, mode);
  return real::openat(dirfd, path, flags, mode);
}

int stat_path(const char *path, struct stat *st, bool follow) {
  std::string real_path;
  if (!rewrite_path(path, real_path)) return follow ? real::stat(path, st) : real::lstat(path, st);
  const int r = follow ? real::stat(real_path.c_str(), st) : real::lstat(real_path.c_str(), st);
  if (r == 0 && S_ISREG(st->st_mode))
    if (NodeRef node = node_at_rewritten(real_path)) fake_node_stat(node, *st);
  return r;
}

int fstat_fd(int fd, struct stat *st) {
  const int r = real::fstat(fd, st);
  if (r == 0)
    if (NodeRef node = node_of_fd(fd)) fake_node_stat(node, *st);
  return r;
}

int fstatat_path(int dirfd, const char *path, struct stat *st, int flags) {
  if (path && path[0] == '/') return stat_path(path, st, !(flags & AT_SYMLINK_NOFOLLOW));
  std::string pub;
  if (resolve_at(dirfd, path, pub))
    return stat_path(pub.c_str(), st, !(flags & AT_SYMLINK_NOFOLLOW));
  if (path && path[0] == '\0' && (flags & AT_EMPTY_PATH)) {
    const int r = real::fstatat(dirfd, path, st, flags);
    if (r == 0)
      if (NodeRef node = node_of_fd(dirfd)) fake_node_stat(node, *st);
    return r;
  }
  return real::fstatat(dirfd, path, st, flags);
}

int statx_path(int dirfd, const char *path, int flags, unsigned mask, struct statx *stx) {
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

ssize_t readlink_path(const char *path, char *buf, size_t size) {
  const ssize_t own = readlink_own_fd(path, buf, size);
  if (own >= 0) return own;
  std::string real_path;
  if (!rewrite_path(path, real_path)) return real::readlink(path, buf, size);
  return real::readlink(real_path.c_str(), buf, size);
}

ssize_t readlinkat_path(int dirfd, const char *path, char *buf, size_t size) {
  if (path && path[0] == '/') return readlink_path(path, buf, size);
  std::string pub;
  if (resolve_at(dirfd, path, pub)) return readlink_path(pub.c_str(), buf, size);
  return real::readlinkat(dirfd, path, buf, size);
}

char *realpath_path(const char *path, char *resolved) {
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

int access_path(const char *path, int mode) {
  std::string real_path;
  if (!rewrite_path(path, real_path)) return real::access(path, mode);
  return real::access(real_path.c_str(), mode);
}

int faccessat_path(int dirfd, const char *path, int mode, int flags) {
  std::string pub;
  if (resolve_at(dirfd, path, pub)) path = pub.c_str();
  std::string real_path;
  if (path && path[0] == '/' && rewrite_path(path, real_path))
    return real::faccessat(dirfd, real_path.c_str(), mode, flags);
  return real::faccessat(dirfd, path, mode, flags);
}

FILE *fopen_path(const char *path, const char *mode) {
  std::string real_path;
  if (!rewrite_path(path, real_path)) return real::fopen(path, mode);
  return real::fopen(real_path.c_str(), mode);
}

DIR *opendir_path(const char *path) {
  std::string real_path;
  if (!rewrite_path(path, real_path)) return real::opendir(path);
  DIR *d = real::opendir(real_path.c_str());
  if (!d) return nullptr;
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
    __atomic_add_fetch(&fast::g_dri_dirs, 1, __ATOMIC_RELEASE);
  }
  return d;
}

void forget_dir(DIR *dir) {
  std::lock_guard lk(g_dirs_mu);
  auto it = std::find(g_dri_dirs.begin(), g_dri_dirs.end(), dir);
  if (it == g_dri_dirs.end()) return;
  g_dri_dirs.erase(it);
  __atomic_sub_fetch(&fast::g_dri_dirs, 1, __ATOMIC_RELEASE);
}

void fix_dirent_type(DIR *dir, const char *name, unsigned char *d_type) {
  if (node_entry_name(name) && is_dri_dir(dir)) *d_type = DT_CHR;
}

}  // namespace rvgl::emu::ops
