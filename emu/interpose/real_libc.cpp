#include "interpose/real_libc.h"

#include <dlfcn.h>
#include <link.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace rvgl::emu::real {

namespace {

int find_self(dl_phdr_info *info, size_t, void *data) {
  // The first object dl_iterate_phdr reports is the executable.
  const auto self = reinterpret_cast<ElfW(Addr)>(&find_self);
  bool *in_exe = static_cast<bool *>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const ElfW(Addr) lo = info->dlpi_addr + ph.p_vaddr;
    if (self >= lo && self < lo + ph.p_memsz) *in_exe = true;
  }
  return 1;  // stop after the executable
}

// No function-local static: its guard is a sanitizer interceptor, unusable this early.
bool linked_into_executable() {
  static int state;  // 0 unknown, 1 no, 2 yes
  int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
  if (!s) {
    bool in_exe = false;
    dl_iterate_phdr(find_self, &in_exe);
    s = in_exe ? 2 : 1;
    __atomic_store_n(&state, s, __ATOMIC_RELEASE);
  }
  return s == 2;
}

// Linked into the executable (rvgl_emu_dep), our definitions replace a sanitizer runtime's
// interceptors too; calling its "__interceptor_" entry keeps its fd and race tracking intact (its
// own REAL() pointers lead to libc). Preloaded as a library after a shared sanitizer runtime, that
// runtime's REAL() pointers lead back to us, so only the object after us (libc) will do.
void *resolve(const char *name) {
  if (linked_into_executable()) {
    // No snprintf or string functions: this can run inside a sanitizer runtime's
    // initialisation, before its interceptors of those work.
    char buf[96];
    size_t n = 0;
    for (const char *p = "__interceptor_"; *p; ++p)
      buf[n++] = *p;
    for (const char *p = name; *p && n + 1 < sizeof(buf); ++p)
      buf[n++] = *p;
    buf[n] = '\0';
    if (void *p = dlsym(RTLD_DEFAULT, buf)) return p;
  }
  if (void *p = dlsym(RTLD_NEXT, name)) return p;
  return dlsym(RTLD_DEFAULT, name);
}

template <typename Fn>
Fn lookup(void *&slot, const char *name) {
  void *p = __atomic_load_n(&slot, __ATOMIC_ACQUIRE);
  if (!p) {
    p = resolve(name);
    if (!p) {
      // Without libc's own entry points nothing can work; say so instead of crashing later.
      static const char msg[] = "rvgl-emu: cannot resolve a libc symbol\n";
      ::syscall(SYS_write, 2, msg, sizeof(msg) - 1);
      std::abort();
    }
    __atomic_store_n(&slot, p, __ATOMIC_RELEASE);
  }
  return reinterpret_cast<Fn>(p);
}

#define RVGL_REAL(type, name) \
  static void *slot_##name;   \
  auto fn_##name = lookup<type>(slot_##name, #name)

}  // namespace

int open(const char *path, int flags, mode_t mode) {
  RVGL_REAL(int (*)(const char *, int, ...), open);
  return fn_open(path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, mode_t mode) {
  RVGL_REAL(int (*)(int, const char *, int, ...), openat);
  return fn_openat(dirfd, path, flags, mode);
}

int close(int fd) {
  RVGL_REAL(int (*)(int), close);
  return fn_close(fd);
}

int close_range(unsigned first, unsigned last, int flags) {
  RVGL_REAL(int (*)(unsigned, unsigned, int), close_range);
  return fn_close_range(first, last, flags);
}

int dup(int fd) {
  RVGL_REAL(int (*)(int), dup);
  return fn_dup(fd);
}

int dup2(int fd, int to) {
  RVGL_REAL(int (*)(int, int), dup2);
  return fn_dup2(fd, to);
}

int dup3(int fd, int to, int flags) {
  RVGL_REAL(int (*)(int, int, int), dup3);
  return fn_dup3(fd, to, flags);
}

int fcntl(int fd, int cmd, void *arg) {
  RVGL_REAL(int (*)(int, int, ...), fcntl);
  return fn_fcntl(fd, cmd, arg);
}

int ioctl(int fd, unsigned long request, void *arg) {
  RVGL_REAL(int (*)(int, unsigned long, ...), ioctl);
  return fn_ioctl(fd, request, arg);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t offset) {
  RVGL_REAL(void *(*)(void *, size_t, int, int, int, off_t), mmap);
  return fn_mmap(addr, len, prot, flags, fd, offset);
}

int stat(const char *path, struct stat *st) {
  RVGL_REAL(int (*)(const char *, struct stat *), stat);
  return fn_stat(path, st);
}

int lstat(const char *path, struct stat *st) {
  RVGL_REAL(int (*)(const char *, struct stat *), lstat);
  return fn_lstat(path, st);
}

int fstat(int fd, struct stat *st) {
  RVGL_REAL(int (*)(int, struct stat *), fstat);
  return fn_fstat(fd, st);
}

int fstatat(int dirfd, const char *path, struct stat *st, int flags) {
  RVGL_REAL(int (*)(int, const char *, struct stat *, int), fstatat);
  return fn_fstatat(dirfd, path, st, flags);
}

int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *stx) {
  RVGL_REAL(int (*)(int, const char *, int, unsigned, struct statx *), statx);
  return fn_statx(dirfd, path, flags, mask, stx);
}

ssize_t readlink(const char *path, char *buf, size_t size) {
  RVGL_REAL(ssize_t(*)(const char *, char *, size_t), readlink);
  return fn_readlink(path, buf, size);
}

ssize_t readlinkat(int dirfd, const char *path, char *buf, size_t size) {
  RVGL_REAL(ssize_t(*)(int, const char *, char *, size_t), readlinkat);
  return fn_readlinkat(dirfd, path, buf, size);
}

char *realpath(const char *path, char *resolved) {
  RVGL_REAL(char *(*)(const char *, char *), realpath);
  return fn_realpath(path, resolved);
}

DIR *opendir(const char *path) {
  RVGL_REAL(DIR * (*)(const char *), opendir);
  return fn_opendir(path);
}

int closedir(DIR *dir) {
  RVGL_REAL(int (*)(DIR *), closedir);
  return fn_closedir(dir);
}

struct dirent *readdir(DIR *dir) {
  RVGL_REAL(struct dirent * (*)(DIR *), readdir);
  return fn_readdir(dir);
}

struct dirent64 *readdir64(DIR *dir) {
  RVGL_REAL(struct dirent64 * (*)(DIR *), readdir64);
  return fn_readdir64(dir);
}

int access(const char *path, int mode) {
  RVGL_REAL(int (*)(const char *, int), access);
  return fn_access(path, mode);
}

int faccessat(int dirfd, const char *path, int mode, int flags) {
  RVGL_REAL(int (*)(int, const char *, int, int), faccessat);
  return fn_faccessat(dirfd, path, mode, flags);
}

FILE *fopen(const char *path, const char *mode) {
  RVGL_REAL(FILE * (*)(const char *, const char *), fopen);
  return fn_fopen(path, mode);
}

int truncate(const char *path, off_t len) {
  RVGL_REAL(int (*)(const char *, off_t), truncate);
  return fn_truncate(path, len);
}

int mkdirat(int dirfd, const char *path, mode_t mode) {
  RVGL_REAL(int (*)(int, const char *, mode_t), mkdirat);
  return fn_mkdirat(dirfd, path, mode);
}

int unlinkat(int dirfd, const char *path, int flags) {
  RVGL_REAL(int (*)(int, const char *, int), unlinkat);
  return fn_unlinkat(dirfd, path, flags);
}

int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
  RVGL_REAL(int (*)(int, const char *, int, const char *), renameat);
  return fn_renameat(olddirfd, oldpath, newdirfd, newpath);
}

int fchmodat(int dirfd, const char *path, mode_t mode, int flags) {
  RVGL_REAL(int (*)(int, const char *, mode_t, int), fchmodat);
  return fn_fchmodat(dirfd, path, mode, flags);
}

int fchownat(int dirfd, const char *path, uid_t uid, gid_t gid, int flags) {
  RVGL_REAL(int (*)(int, const char *, uid_t, gid_t, int), fchownat);
  return fn_fchownat(dirfd, path, uid, gid, flags);
}

ssize_t getxattr(const char *path, const char *name, void *value, size_t size) {
  RVGL_REAL(ssize_t(*)(const char *, const char *, void *, size_t), getxattr);
  return fn_getxattr(path, name, value, size);
}

ssize_t lgetxattr(const char *path, const char *name, void *value, size_t size) {
  RVGL_REAL(ssize_t(*)(const char *, const char *, void *, size_t), lgetxattr);
  return fn_lgetxattr(path, name, value, size);
}

ssize_t listxattr(const char *path, char *list, size_t size) {
  RVGL_REAL(ssize_t(*)(const char *, char *, size_t), listxattr);
  return fn_listxattr(path, list, size);
}

ssize_t llistxattr(const char *path, char *list, size_t size) {
  RVGL_REAL(ssize_t(*)(const char *, char *, size_t), llistxattr);
  return fn_llistxattr(path, list, size);
}

}  // namespace rvgl::emu::real
