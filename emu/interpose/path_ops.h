// What the path interposers do once the cheap filter (core/fast_state.h) says a call may concern
// the emulator: rewrite into the fake tree, open device nodes as emulated files, make them stat as
// character devices. Each falls back to libc for paths that turn out not to be ours.
// Plain C types only: interpose_paths.cpp, which calls these, is built without instrumentation
// and must not instantiate C++ library code the instrumented objects share.
#pragma once

#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

struct statx;

namespace rvgl::emu::ops {

int open_path(const char *path, int flags, mode_t mode);
int openat_path(int dirfd, const char *path, int flags, mode_t mode);
int stat_path(const char *path, struct stat *st, bool follow);
int fstat_fd(int fd, struct stat *st);
int fstatat_path(int dirfd, const char *path, struct stat *st, int flags);
int statx_path(int dirfd, const char *path, int flags, unsigned mask, struct statx *stx);
ssize_t readlink_path(const char *path, char *buf, size_t size);
ssize_t readlinkat_path(int dirfd, const char *path, char *buf, size_t size);
char *realpath_path(const char *path, char *resolved);
int access_path(const char *path, int mode);
int faccessat_path(int dirfd, const char *path, int mode, int flags);
FILE *fopen_path(const char *path, const char *mode);
DIR *opendir_path(const char *path);
// Opens with write intent (O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND): an effectful attribute
// of the fake tree gets its pipe, another file of the tree EACCES (sysfs files without a store),
// a file of the host's /sys or /proc is absorbed into the tree; anything else goes to libc.
int open_for_write(int dirfd, const char *path, int flags, mode_t mode);
FILE *fopen_for_write(const char *path, const char *mode);
// Where a change of the file system (truncate, mkdir, unlink, rename, chmod, chown) would land:
// 0 pass it to libc; -1 (errno EACCES) refuse it, for the tree and the host's /sys and /proc.
int guard_change(int dirfd, const char *path, bool follow);
// Extended attributes of emulated paths come from the tree (ls -l asks for them per entry).
ssize_t getxattr_path(const char *path, const char *name, void *value, size_t size, bool follow);
ssize_t listxattr_path(const char *path, char *list, size_t size, bool follow);
// A DIR stream is going away (fast::g_dri_dirs said some fake /dev/dri stream is open).
void forget_dir(DIR *dir);
// Entries of the fake /dev/dri are device nodes: report them as DT_CHR.
void fix_dirent_type(DIR *dir, const char *name, unsigned char *d_type);

}  // namespace rvgl::emu::ops
