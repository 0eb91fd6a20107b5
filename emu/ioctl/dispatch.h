// Routes an ioctl on an emulator fd the way drm_ioctl() does: by type and number through a table,
// with the kernel's size handling (copy in what both sides know, zero-extend, copy the caller's
// size back out) and render-node permissions.
#pragma once

#include <memory>

#include "core/open_file.h"

namespace rvgl::emu {

// Emulated ioctls the calling thread has made (all files).
uint64_t thread_ioctls();
// Returns the ioctl's result (>= 0) or -errno.
int dispatch_ioctl(const std::shared_ptr<OpenFile> &file, unsigned long request, void *arg);

}  // namespace rvgl::emu
