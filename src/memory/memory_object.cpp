#include "memory/memory_object.h"

#include <algorithm>

namespace rvgl {

MemoryObject::MemoryObject(std::shared_ptr<AmdgpuDevice> dev, Kind kind, uint32_t domain,
                           std::vector<Segment> segments, bool gpu_read_only)
    : dev_(std::move(dev)),
      kind_(kind),
      domain_(domain),
      segments_(std::move(segments)),
      read_only_(gpu_read_only) {
  for (const auto &s : segments_) size_ += s.size;
}

MemoryObject::~MemoryObject() {
  // Handles first: a userptr handle must not outlive the host mapping it points into.
  for (const auto &s : segments_) dev_->gem_close(s.handle);
  kept_mappings_.clear();
  kept_fds_.clear();
}

void MemoryObject::for_each_piece(
    uint64_t offset, uint64_t size,
    const std::function<void(uint32_t, uint64_t, uint64_t, uint64_t)> &fn) const {
  uint64_t seg_start = 0;
  uint64_t done = 0;
  for (const auto &s : segments_) {
    const uint64_t seg_end = seg_start + s.size;
    const uint64_t cur = offset + done;
    if (done < size && cur < seg_end && cur >= seg_start) {
      const uint64_t len = std::min(seg_end - cur, size - done);
      fn(s.handle, cur - seg_start, done, len);
      done += len;
    }
    seg_start = seg_end;
  }
}

}  // namespace rvgl
