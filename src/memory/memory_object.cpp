#include "memory/memory_object.h"

#include <algorithm>
#include <cerrno>

namespace rvgl {

MemoryObject::MemoryObject(std::shared_ptr<AmdgpuDevice> dev, Kind kind, uint32_t domain,
                           std::vector<Segment> segments, bool gpu_read_only)
    : dev_(std::move(dev)),
      kind_(kind),
      domain_(domain),
      segments_(std::move(segments)),
      read_only_(gpu_read_only) {
  for (const auto &s : segments_)
    size_ += s.size;
}

MemoryObject::~MemoryObject() {
  // Handles first: a userptr handle must not outlive the host mapping it points into.
  cpu_map_.reset();
  for (const auto &s : segments_)
    dev_->gem_close(s.handle);
  kept_mappings_.clear();
  kept_fds_.clear();
}

uint8_t *MemoryObject::host_range(uint64_t offset, uint64_t size, int *err) {
  uint64_t seg_start = 0;
  for (const auto &s : segments_) {
    if (offset >= seg_start && offset - seg_start < s.size) {
      if (size > s.size - (offset - seg_start)) break;  // spans segments
      const uint64_t in_seg = offset - seg_start;
      if (s.host) return static_cast<uint8_t *>(s.host) + in_seg;
      if (kind_ != Kind::kBo || segments_.size() != 1) break;
      if (!cpu_map_.valid()) {
        uint64_t fake_offset;
        if ((*err = dev_->gem_mmap_offset(s.handle, &fake_offset))) return nullptr;
        cpu_map_ = Mapping::map_shared(dev_->fd(), s.size, PROT_READ | PROT_WRITE,
                                       static_cast<off_t>(fake_offset));
        if (!cpu_map_.valid()) {
          *err = -errno;
          return nullptr;
        }
      }
      return cpu_map_.as<uint8_t>() + in_seg;
    }
    seg_start += s.size;
  }
  *err = -EINVAL;
  return nullptr;
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
