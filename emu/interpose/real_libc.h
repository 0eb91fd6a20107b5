// The next definition of each libc function this library interposes, for the emulator's own use
// and for passing calls through. Resolved lazily (our functions can run before any constructor).
#pragma once

#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

namespace rvgl::emu::real {

int open(const char *path, int flags, mode_t mode);
int openat(int dirfd, const char *path, int flags, mode_t mode);
int close(int fd);
int close_range(unsigned first, unsigned last, int flags);
int dup(int fd);
int dup2(int fd, int to);
int dup3(int fd, int to, int flags);
int fcntl(int fd, int cmd, void *arg);
int ioctl(int fd, unsigned long request, void *arg);
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t offset);
int stat(const char *path, struct stat *st);
int lstat(const char *path, struct stat *st);
int fstat(int fd, struct stat *st);
int fstatat(int dirfd, const char *path, struct stat *st, int flags);
int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *stx);
ssize_t readlink(const char *path, char *buf, size_t size);
ssize_t readlinkat(int dirfd, const char *path, char *buf, size_t size);
char *realpath(const char *path, char *resolved);
DIR *opendir(const char *path);
int closedir(DIR *dir);
struct dirent *readdir(DIR *dir);
struct dirent64 *readdir64(DIR *dir);
int access(const char *path, int mode);
int faccessat(int dirfd, const char *path, int mode, int flags);
FILE *fopen(const char *path, const char *mode);
// Path operations that change the file system: passed through unless the path is the host's
// /sys or /proc or the fake tree (interpose_writes.cpp).
int truncate(const char *path, off_t len);
int mkdirat(int dirfd, const char *path, mode_t mode);
int unlinkat(int dirfd, const char *path, int flags);
int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);
int fchmodat(int dirfd, const char *path, mode_t mode, int flags);
int fchownat(int dirfd, const char *path, uid_t uid, gid_t gid, int flags);
ssize_t getxattr(const char *path, const char *name, void *value, size_t size);
ssize_t lgetxattr(const char *path, const char *name, void *value, size_t size);
ssize_t listxattr(const char *path, char *list, size_t size);
ssize_t llistxattr(const char *path, char *list, size_t size);

}  // namespace rvgl::emu::real
