#include "memory/memory_object.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

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

std::shared_ptr<MemoryObject> MemoryObject::adopt(const std::shared_ptr<AmdgpuDevice> &dev,
                                                  Kind kind, uint32_t domain,
                                                  std::vector<Segment> &&segments,
                                                  bool gpu_read_only) {
  try {
    // make_shared allocates before it constructs: the list is moved from only once that worked.
    return std::make_shared<MemoryObject>(dev, kind, domain, std::move(segments), gpu_read_only);
  } catch (...) {
    for (const Segment &s : segments)
      dev->gem_close(s.handle);
    throw;
  }
}

std::shared_ptr<MemoryObject> MemoryObject::adopt_one(const std::shared_ptr<AmdgpuDevice> &dev,
                                                      Kind kind, uint32_t domain, Segment segment,
                                                      bool gpu_read_only) {
  std::vector<Segment> one;
  try {
    one.push_back(segment);
  } catch (...) {
    dev->gem_close(segment.handle);
    throw;
  }
  return adopt(dev, kind, domain, std::move(one), gpu_read_only);
}

MemoryObject::~MemoryObject() {
  // Handles first: a userptr handle must not outlive the host mapping it points into.
  if (!kernel_released_) release_handles();
  kept_mappings_.clear();
}

void MemoryObject::release_handles() {
  if (registry_) {
    registry_->release(*this);
  } else {
    for (const Segment &s : segments_)
      if (s.handle) dev_->gem_close(s.handle);
  }
}

void MemoryObject::revoke() {
  {
    std::lock_guard lk(guest_mu_);
    if (revoked_) return;
    revoked_ = true;
    guest_ranges_.clear();
  }
  // Nothing of ours names the pages any more: the kernel objects go now, not when the last
  // reference (perhaps an SPM worker's) dies.
  release_handles();
  for (Segment &s : segments_) {
    s.handle = 0;
    s.host = nullptr;
  }
  kernel_released_ = true;
  kept_mappings_.clear();
  charge_.reset();  // the quota counts what the kernel holds
}

bool MemoryObject::revoked() const {
  std::lock_guard lk(guest_mu_);
  return revoked_;
}

int MemoryObject::write_guest(uint64_t offset, const void *src, uint64_t len) {
  std::lock_guard lk(guest_mu_);
  if (revoked_) return -ENOENT;
  if (offset > size_ || len > size_ - offset) return -EINVAL;
  const auto *p = static_cast<const uint8_t *>(src);
  uint64_t pos = 0;  // start of the current range in the linear space
  for (const auto &[addr, bytes] : guest_ranges_) {
    if (len == 0) break;
    if (offset < pos + bytes) {
      const uint64_t in = offset - pos;
      const uint64_t n = std::min(bytes - in, len);
      iovec local{const_cast<uint8_t *>(p), n};
      iovec remote{reinterpret_cast<void *>(addr + in), n};
      // Our own address space: a page the VMM unmapped behind our back is EFAULT, not SIGSEGV.
      // A sandbox that forbids the call (seccomp: ENOSYS / EPERM) gets a plain copy: the pages
      // are the VMM's to keep mapped while the resource lives, and revoke() cannot run meanwhile.
      const ssize_t w = process_vm_writev(getpid(), &local, 1, &remote, 1, 0);
      if (w < 0 && (errno == ENOSYS || errno == EPERM))
        std::memcpy(remote.iov_base, local.iov_base, n);
      else if (w != static_cast<ssize_t>(n))
        return -EFAULT;
      p += n;
      offset += n;
      len -= n;
    }
    pos += bytes;
  }
  return len == 0 ? 0 : -EINVAL;
}

uint8_t *MemoryObject::host_range(uint64_t offset, uint64_t size,
                                  std::shared_ptr<const void> *mapping, int *err) {
  uint64_t seg_start = 0;
  for (const auto &s : segments_) {
    if (offset >= seg_start && offset - seg_start < s.size) {
      if (size > s.size - (offset - seg_start)) break;  // spans segments
      const uint64_t in_seg = offset - seg_start;
      if (s.host) return static_cast<uint8_t *>(s.host) + in_seg;
      if (kind_ != Kind::kBo || segments_.size() != 1) break;
      std::shared_ptr<Mapping> map = cpu_map_.lock();
      if (!map) {
        uint64_t fake_offset;
        if ((*err = dev_->gem_mmap_offset(s.handle, &fake_offset))) return nullptr;
        Mapping m = Mapping::map_shared(dev_->fd(), s.size, PROT_READ | PROT_WRITE,
                                        static_cast<off_t>(fake_offset));
        if (!m.valid()) {
          *err = -errno;
          return nullptr;
        }
        try {
          map = std::make_shared<Mapping>(std::move(m));
        } catch (const std::bad_alloc &) {
          *err = -ENOMEM;  // m unmaps on the way out
          return nullptr;
        }
        cpu_map_ = map;
      }
      uint8_t *p = map->as<uint8_t>() + in_seg;
      *mapping = std::move(map);
      return p;
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
