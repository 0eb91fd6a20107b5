// /dev/udmabuf: turns ranges of sealed memfds into one dma-buf without copying (the kernel pins the
// pages). Lives beside AmdgpuDevice because src/amdgpu is the only code issuing host ioctls.
#pragma once

#include <cstdint>
#include <span>

#include "util/unique_fd.h"

namespace rvgl {

struct UdmabufItem {
  int memfd;  // F_SEAL_SHRINK-sealed, not F_SEAL_WRITE (drivers/dma-buf/udmabuf.c)
  uint64_t offset;
  uint64_t size;
};

class Udmabuf {
 public:
  // Opens /dev/udmabuf; -errno in *err when there is none.
  static Udmabuf open(int *err);
  bool valid() const { return dev_.valid(); }

  // UDMABUF_CREATE_LIST (CLOEXEC): one dma-buf showing the items back to back. 0 or -errno.
  int create_list(std::span<const UdmabufItem> items, UniqueFd *out) const;

 private:
  UniqueFd dev_;
};

// True when memfd carries F_SEAL_SHRINK, which udmabuf requires of every item's file.
bool udmabuf_accepts(int memfd);

}  // namespace rvgl
