// What the fd interposers do once the cheap filter (core/fast_state.h) says an fd may be one the
// emulator handed out. Plain C types only, for the same reason as path_ops.h.
#pragma once

#include <sys/types.h>

namespace rvgl::emu::ops {

int close_fd(int fd);
// close_range() with the emulator's fds in the range untracked.
int close_fd_range(unsigned first, unsigned last, int flags);
// After a successful duplication onto `to`: `to` denotes what `from` does (and no longer what it
// denoted before, which dup2/dup3 closed).
void retrack_fd(int from, int to);
// Before dup2/dup3 onto `to`: a caller's eventfd known at `to` is let go while it is still there.
void before_replace(int to);
// `caller_frame`: the interposed ioctl()'s frame; the caller's live stack lies above it.
int ioctl_fd(int fd, unsigned long request, void *arg, const void *caller_frame);
void *mmap_fd(void *addr, size_t len, int prot, int flags, int fd, off_t off);

}  // namespace rvgl::emu::ops
