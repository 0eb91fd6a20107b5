#include "interpose/path_ops.h"

#include <fcntl.h>
#include <limits.h>
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
#include "core/fast_state.h"
#include "core/runtime_knobs.h"
#include "fs/sysfs_attributes.h"
#include "interpose/emulated_paths.h"
#include "interpose/real_libc.h"
#include "util/kernel_call.h"

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

bool has_write_intent(int flags) {
  return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC | O_APPEND));
}

bool fopen_writes(const char *mode) {
  return mode && (strchr(mode, 'w') || strchr(mode, 'a') || strchr(mode, '+'));
}

// Lexical normalisation of an absolute path: "//", "." and ".." resolved without the file system.
std::string normalise(const std::string &abs) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < abs.size()) {
    size_t j = abs.find('/', i);
    if (j == std::string::npos) j = abs.size();
    const std::string part = abs.substr(i, j - i);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    i = j + 1;
  }
  std::string out;
  for (const auto &p : parts)
    out += "/" + p;
  return out.empty() ? "/" : out;
}

// The absolute spelling of path under dirfd (AT_FDCWD: the working directory).
bool absolute(int dirfd, const char *path, std::string &out) {
  if (!path) return false;
  if (path[0] == '/') {
    out = path;
    return true;
  }
  char base[PATH_MAX];
  if (dirfd == AT_FDCWD) {
    if (!getcwd(base, sizeof(base))) return false;
  } else {
    const std::string link = "/proc/self/fd/" + std::to_string(dirfd);
    const ssize_t n = real::readlink(link.c_str(), base, sizeof(base) - 1);
    if (n <= 0) return false;
    base[n] = '\0';
  }
  out = std::string(base) + "/" + path;
  return true;
}

// Realpath of `norm`, or of its directory plus the last name when the file does not exist (or
// when the last name is not to be followed); `norm` itself when neither resolves.
std::string resolve(const std::string &norm, bool follow) {
  char buf[PATH_MAX];
  const size_t slash = norm.find_last_of('/');
  const std::string dir = slash == 0 ? "/" : norm.substr(0, slash), base = norm.substr(slash + 1);
  if (follow && real::realpath(norm.c_str(), buf)) return buf;
  if (real::realpath(dir.c_str(), buf)) return normalise(std::string(buf) + "/" + base);
  return norm;
}

// Where path really lands, in its public spelling: an emulated path is resolved inside the tree
// (its links lead to tree paths, never to a real device of the machine), anything else on the
// host's file system; a host path that leads into the tree (a tree directory's fd) maps back.
std::string canonical(const std::string &abs, bool follow) {
  const std::string norm = normalise(abs);
  std::string in_tree;
  const bool emulated = rewrite_path(norm.c_str(), in_tree);
  const std::string out = resolve(emulated ? in_tree : norm, follow);
  if (Emulator *e = Emulator::peek()) {
    std::lock_guard lk(e->mutex());
    std::string pub;
    if (FakeTree *t = e->tree_locked(); t && t->to_public(out, pub)) return pub;
  }
  return emulated ? norm : out;
}

bool under(const std::string &p, const char *prefix) {
  const size_t n = strlen(prefix);
  return p.compare(0, n, prefix) == 0 && (p.size() == n || p[n] == '/');
}

// The host's sysfs or procfs, which nothing under the emulator may change. /proc/<pid>/fd/<n>
// (and /dev/fd/<n>) reopen an fd the process has: that is its own file, not procfs state.
bool host_kernel_fs(const std::string &canon) {
  if (under(canon, "/sys")) return true;
  if (!under(canon, "/proc")) return false;
  const size_t fd = canon.find("/fd/");
  const size_t task = canon.find("/task/");
  const size_t first = canon.find('/', 6);
  if (fd == std::string::npos) return true;
  return !(fd == first || (task == first && fd > task));
}

void trace_refused(const char *what, const std::string &where) {
  if (!knobs().trace.load(std::memory_order_relaxed)) return;
  const std::string line =
      "rvgl-emu[" + std::to_string(getpid()) + "]: " + what + " " + where + "\n";
  (void)!::write(2, line.data(), line.size());
}

}  // namespace

int open_for_write(int dirfd, const char *path, int flags, mode_t mode) {
  KernelCall kernel_call;
  std::string abs;
  if (!resolve_at(dirfd, path, abs) && !absolute(dirfd, path, abs))
    return real::openat(dirfd, path, flags, mode);
  apply_sysfs_writes();
  const std::string canon = canonical(abs, !(flags & O_NOFOLLOW));
  std::string real_path;
  if (rewrite_path(canon.c_str(), real_path)) {
    if (NodeRef node = node_at_rewritten(real_path)) return open_node(node, real_path, flags);
    int device = -1;
    FakeTree::Attribute attr = FakeTree::Attribute::None;
    Emulator &e = Emulator::get();
    {
      std::lock_guard lk(e.mutex());
      if (FakeTree *t = e.tree_locked()) attr = t->attribute_at(real_path, device);
    }
    if (attr != FakeTree::Attribute::None) return open_sysfs_attribute(attr, device, flags);
    struct stat st;
    if (real::stat(real_path.c_str(), &st) != 0) return -1;  // errno from the tree (ENOENT)
    errno = S_ISDIR(st.st_mode) ? EISDIR : EACCES;           // an attribute with no store
    return -1;
  }
  if (!host_kernel_fs(canon)) return real::openat(dirfd, path, flags, mode);
  // sysfs and procfs create nothing: a name they lack is refused, an existing one absorbed.
  struct stat host;
  if (real::stat(canon.c_str(), &host) != 0) {
    if (flags & O_CREAT) errno = EACCES;
    trace_refused("write refused:", canon);
    return -1;
  }
  trace_refused("write absorbed:", canon);
  Emulator &e = Emulator::get();
  std::string sink;
  {
    std::lock_guard lk(e.mutex());
    FakeTree *t = e.tree_locked();
    if (!t) return -1;
    sink = t->absorb_path(canon);
  }
  return real::open(sink.c_str(), (flags & ~(O_DIRECTORY | O_NOFOLLOW | O_EXCL)) | O_CREAT, 0600);
}

FILE *fopen_for_write(const char *path, const char *mode) {
  KernelCall kernel_call;
  int flags = O_CLOEXEC * (strchr(mode, 'e') != nullptr);
  if (strchr(mode, '+'))
    flags |= O_RDWR;
  else
    flags |= O_WRONLY;
  if (mode[0] == 'w') flags |= O_CREAT | O_TRUNC;
  if (mode[0] == 'a') flags |= O_CREAT | O_APPEND;
  std::string abs;
  if (!absolute(AT_FDCWD, path, abs)) return real::fopen(path, mode);
  const std::string canon = canonical(abs, true);
  std::string real_path;
  if (!rewrite_path(canon.c_str(), real_path) && !host_kernel_fs(canon))
    return real::fopen(path, mode);
  const int fd = open_for_write(AT_FDCWD, canon.c_str(), flags, 0666);
  if (fd < 0) return nullptr;
  FILE *f = fdopen(fd, mode);
  if (!f) real::close(fd);
  return f;
}

int guard_change(int dirfd, const char *path, bool follow) {
  KernelCall kernel_call;
  std::string abs;
  if (!resolve_at(dirfd, path, abs) && !absolute(dirfd, path, abs)) return 0;
  const std::string canon = canonical(abs, follow);
  std::string real_path;
  if (!rewrite_path(canon.c_str(), real_path) && !host_kernel_fs(canon)) return 0;
  trace_refused("change refused:", canon);
  errno = EACCES;
  return -1;
}

ssize_t getxattr_path(const char *path, const char *name, void *value, size_t size, bool follow) {
  KernelCall kernel_call;
  std::string real_path;
  if (!rewrite_path(path, real_path))
    return follow ? real::getxattr(path, name, value, size)
                  : real::lgetxattr(path, name, value, size);
  return follow ? real::getxattr(real_path.c_str(), name, value, size)
                : real::lgetxattr(real_path.c_str(), name, value, size);
}

ssize_t listxattr_path(const char *path, char *list, size_t size, bool follow) {
  KernelCall kernel_call;
  std::string real_path;
  if (!rewrite_path(path, real_path))
    return follow ? real::listxattr(path, list, size) : real::llistxattr(path, list, size);
  return follow ? real::listxattr(real_path.c_str(), list, size)
                : real::llistxattr(real_path.c_str(), list, size);
}

int open_path(const char *path, int flags, mode_t mode) {
  KernelCall kernel_call;
  if (has_write_intent(flags)) return open_for_write(AT_FDCWD, path, flags, mode);
  apply_sysfs_writes();
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
  KernelCall kernel_call;
  if (has_write_intent(flags)) return open_for_write(dirfd, path, flags, mode);
  if (path && path[0] == '/') return open_path(path, flags, mode);
  std::string pub;
  if (resolve_at(dirfd, path, pub)) return open_path(pub.c_str(), flags, mode);
  return real::openat(dirfd, path, flags, mode);
}

int stat_path(const char *path, struct stat *st, bool follow) {
  KernelCall kernel_call;
  std::string real_path;
  if (!rewrite_path(path, real_path)) return follow ? real::stat(path, st) : real::lstat(path, st);
  const int r = follow ? real::stat(real_path.c_str(), st) : real::lstat(real_path.c_str(), st);
  if (r == 0 && S_ISREG(st->st_mode))
    if (NodeRef node = node_at_rewritten(real_path)) fake_node_stat(node, *st);
  return r;
}

int fstat_fd(int fd, struct stat *st) {
  KernelCall kernel_call;
  const int r = real::fstat(fd, st);
  if (r == 0)
    if (NodeRef node = node_of_fd(fd)) fake_node_stat(node, *st);
  return r;
}

int fstatat_path(int dirfd, const char *path, struct stat *st, int flags) {
  KernelCall kernel_call;
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
  KernelCall kernel_call;
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
  KernelCall kernel_call;
  const ssize_t own = readlink_own_fd(path, buf, size);
  if (own >= 0) return own;
  std::string real_path;
  if (!rewrite_path(path, real_path)) return real::readlink(path, buf, size);
  return real::readlink(real_path.c_str(), buf, size);
}

ssize_t readlinkat_path(int dirfd, const char *path, char *buf, size_t size) {
  KernelCall kernel_call;
  if (path && path[0] == '/') return readlink_path(path, buf, size);
  std::string pub;
  if (resolve_at(dirfd, path, pub)) return readlink_path(pub.c_str(), buf, size);
  return real::readlinkat(dirfd, path, buf, size);
}

char *realpath_path(const char *path, char *resolved) {
  KernelCall kernel_call;
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
  KernelCall kernel_call;
  std::string real_path;
  if (!rewrite_path(path, real_path)) return real::access(path, mode);
  return real::access(real_path.c_str(), mode);
}

int faccessat_path(int dirfd, const char *path, int mode, int flags) {
  KernelCall kernel_call;
  std::string pub;
  if (resolve_at(dirfd, path, pub)) path = pub.c_str();
  std::string real_path;
  if (path && path[0] == '/' && rewrite_path(path, real_path))
    return real::faccessat(dirfd, real_path.c_str(), mode, flags);
  return real::faccessat(dirfd, path, mode, flags);
}

FILE *fopen_path(const char *path, const char *mode) {
  KernelCall kernel_call;
  if (fopen_writes(mode)) return fopen_for_write(path, mode);
  apply_sysfs_writes();
  std::string real_path;
  if (!rewrite_path(path, real_path)) return real::fopen(path, mode);
  return real::fopen(real_path.c_str(), mode);
}

DIR *opendir_path(const char *path) {
  KernelCall kernel_call;
  apply_sysfs_writes();
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
  KernelCall kernel_call;
  std::lock_guard lk(g_dirs_mu);
  auto it = std::find(g_dri_dirs.begin(), g_dri_dirs.end(), dir);
  if (it == g_dri_dirs.end()) return;
  g_dri_dirs.erase(it);
  __atomic_sub_fetch(&fast::g_dri_dirs, 1, __ATOMIC_RELEASE);
}

void fix_dirent_type(DIR *dir, const char *name, unsigned char *d_type) {
  KernelCall kernel_call;
  if (node_entry_name(name) && is_dri_dir(dir)) *d_type = DT_CHR;
}

}  // namespace rvgl::emu::ops
