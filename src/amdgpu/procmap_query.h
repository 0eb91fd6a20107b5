// PROCMAP_QUERY (Linux 6.11): one VMA of this process looked up by address through an ioctl on
// /proc/self/maps, at the cost of the kernel's VMA lookup whatever the size of the map. Lives in
// src/amdgpu because that is the only code issuing host ioctls.
#pragma once

#include <cstdint>

#include "util/unique_fd.h"

namespace rvgl {

struct ProcVma {
  uint64_t start, end;
  uint64_t offset;  // in the file (0 without one)
  uint32_t dev_major, dev_minor;
  uint64_t inode;  // 0: no file behind the VMA
  bool shared;     // VM_MAYSHARE, what /proc/self/maps prints as 's'
  bool writable;   // VM_WRITE, what /proc/self/maps prints as 'w'
};

class ProcmapQuery {
 public:
  // Opens /proc/self/maps; invalid() when it cannot be opened.
  static ProcmapQuery open();
  bool valid() const { return fd_.valid(); }

  // The VMA covering addr: 0, -ENOENT (none covers it), -ENOTTY (the kernel predates the
  // ioctl), or another -errno (e.g. a seccomp filter's).
  int covering(uint64_t addr, ProcVma *out) const;

 private:
  UniqueFd fd_;
};

}  // namespace rvgl
