// /dev/udmabuf: turns ranges of sealed memfds into one dma-buf without copying (the kernel pins the
// pages). Lives beside AmdgpuDevice because src/amdgpu is the only code issuing host ioctls.
#pragma once

#include <cstdint>
#include <vector>

#include "util/unique_fd.h"

namespace rvgl {

// The argument of one UDMABUF_CREATE_LIST (struct udmabuf_create_list and its items, uapi
// udmabuf.h), filled in place: an import of thousands of pages builds each list once, in one
// buffer reused for every udmabuf.
class UdmabufList {
 public:
  explicit UdmabufList(uint32_t max_items);
  // False when full or memfd is not an fd. The memfd must be F_SEAL_SHRINK-sealed and not
  // F_SEAL_WRITE (drivers/dma-buf/udmabuf.c, check_memfd_seals()) for the kernel to take it.
  bool add(int memfd, uint64_t offset, uint64_t size);
  uint32_t count() const { return count_; }
  uint64_t bytes() const { return bytes_; }
  void clear();

 private:
  friend class Udmabuf;
  std::vector<uint64_t> mem_;  // 8-byte aligned: the header, then 24-byte items
  uint32_t max_items_;
  uint32_t count_ = 0;
  uint64_t bytes_ = 0;
};

class Udmabuf {
 public:
  // Opens /dev/udmabuf; -errno in *err when there is none.
  static Udmabuf open(int *err);
  bool valid() const { return dev_.valid(); }

  // UDMABUF_CREATE_LIST (CLOEXEC): one dma-buf showing the items back to back. 0 or -errno.
  int create(const UdmabufList &list, UniqueFd *out) const;

 private:
  UniqueFd dev_;
};

// True when memfd carries F_SEAL_SHRINK, which udmabuf requires of every item's file.
bool udmabuf_accepts(int memfd);

}  // namespace rvgl
