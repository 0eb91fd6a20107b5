// A GPU memory object of one context as the guest sees it: one linear buffer. Behind it sit one
// or more GEM handles on the context's device (a userptr blob over scattered guest pages may need
// several, stitched together at consecutive GPU VAs when mapped).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <memory>
#include <vector>

#include "amdgpu/amdgpu_device.h"
#include "memory/usage.h"
#include "util/mapping.h"
#include "util/unique_fd.h"

namespace rvgl {

class MemoryObject {
 public:
  enum class Kind { kBo, kUserptr, kImported };

  struct Segment {
    uint32_t handle;       // GEM handle on the context's device
    uint64_t size;         // bytes of the object's linear space it covers, in order
    void *host = nullptr;  // userptr: the host address the handle was registered on
  };

  // Takes ownership of the GEM handles (closed on destruction) and of `keep` (mappings or fds
  // that must outlive the handles, e.g. the host alias a userptr handle points into).
  MemoryObject(std::shared_ptr<AmdgpuDevice> dev, Kind kind, uint32_t domain,
               std::vector<Segment> segments, bool gpu_read_only);
  ~MemoryObject();
  MemoryObject(const MemoryObject &) = delete;
  MemoryObject &operator=(const MemoryObject &) = delete;

  Kind kind() const { return kind_; }
  uint32_t domain() const { return domain_; }  // RVGL_DOMAIN_* (0 for userptr / imported)
  uint64_t size() const { return size_; }
  bool gpu_read_only() const { return read_only_; }
  const std::vector<Segment> &segments() const { return segments_; }
  AmdgpuDevice &device() const { return *dev_; }

  // Calls fn(handle, offset_in_handle, gpu_offset, length) for each piece of [offset, offset+size)
  // of the linear space; the range must lie within the object.
  void for_each_piece(uint64_t offset, uint64_t size,
                      const std::function<void(uint32_t, uint64_t, uint64_t, uint64_t)> &fn) const;

  // The host address of [offset, offset + size) when it is contiguous in host VA: BOs through a
  // CPU mapping of the device fd (made on first use, kept), userptr objects through the pages
  // they were registered on. nullptr when the range spans segments or the object cannot be
  // mapped (-errno in *err).
  uint8_t *host_range(uint64_t offset, uint64_t size, int *err);

  // Resources that must live as long as the handles.
  void keep_alive(Mapping m) { kept_mappings_.push_back(std::move(m)); }
  void keep_alive(UniqueFd fd) { kept_fds_.push_back(std::move(fd)); }

  // The quota charge returned when this object dies.
  void set_charge(Charge c) { charge_ = std::move(c); }
  void set_bo_flags(uint32_t flags) { bo_flags_ = flags; }
  uint32_t bo_flags() const { return bo_flags_; }

 private:
  std::shared_ptr<AmdgpuDevice> dev_;
  Kind kind_;
  uint32_t domain_;
  std::vector<Segment> segments_;
  uint64_t size_ = 0;
  bool read_only_;
  uint32_t bo_flags_ = 0;
  std::vector<Mapping> kept_mappings_;
  std::vector<UniqueFd> kept_fds_;
  Mapping cpu_map_;
  Charge charge_;
};

}  // namespace rvgl
