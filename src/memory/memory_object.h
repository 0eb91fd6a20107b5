// A GPU memory object of one context as the guest sees it: one linear buffer. Behind it sit one
// or more GEM handles on the context's device (a userptr blob over scattered guest pages may need
// several, stitched together at consecutive GPU VAs when mapped).
//
// A userptr object is guest-owned memory: once the VMM drops the resource (unref, detach, context
// destroy) the guest may reuse those pages and the VMM may unmap them. revoke() is the one switch
// for every host-side use of them: it waits for a host write in progress, refuses later ones, and
// releases the kernel objects (userptr handles, udmabufs, the alias) at once, whoever still holds
// a reference to the object. GPU VA mappings are the context's to remove before (ContextMemory).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <memory>
#include <vector>

#include "amdgpu/amdgpu_device.h"
#include "memory/object_registry.h"
#include "memory/usage.h"
#include "util/mapping.h"

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
  // The object that takes `segments`' GEM handles, made so that a handle always has an owner:
  // if the object cannot be made (out of memory: thrown on), the handles are closed first.
  // Otherwise one just created would stay in the kernel until the context's file closed, a
  // userptr one using the guest's pages after their resource is gone.
  static std::shared_ptr<MemoryObject> adopt(const std::shared_ptr<AmdgpuDevice> &dev, Kind kind,
                                             uint32_t domain, std::vector<Segment> &&segments,
                                             bool gpu_read_only);
  // adopt() of one handle (closed as well if its list cannot be made).
  static std::shared_ptr<MemoryObject> adopt_one(const std::shared_ptr<AmdgpuDevice> &dev,
                                                 Kind kind, uint32_t domain, Segment segment,
                                                 bool gpu_read_only);
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
  // CPU mapping of the device fd, userptr objects through the pages they were registered on.
  // nullptr when the range spans segments or the object cannot be mapped (-errno in *err).
  // A BO's mapping lives only while someone holds *mapping (null for userptr ranges), which keeps
  // it in place without the object, for a kernel that may write there after the object is gone;
  // holders of one object share one mapping. The object keeps none itself: a guest naming many
  // objects once must not leave the VMM process a mapping (a VMA of vm.max_map_count) for each.
  uint8_t *host_range(uint64_t offset, uint64_t size, std::shared_ptr<const void> *mapping,
                      int *err);

  // Host writes into guest-owned pages (userptr), e.g. SPM samples: copied through
  // process_vm_writev so an unmapped page is -EFAULT, never a crash. -ENOENT once revoked; waits
  // for nothing but a revoke() in progress.
  int write_guest(uint64_t offset, const void *src, uint64_t len);
  // Userptr: the host ranges (VMM addresses of the guest pages) behind the linear space, in order.
  struct GuestRange {
    uint64_t addr;  // host VA
    uint64_t size;  // bytes
  };
  void set_guest_ranges(std::vector<GuestRange> ranges) { guest_ranges_ = std::move(ranges); }
  // Whether a GPU VM mapping of the object was ever asked of the kernel (even one undone at once:
  // its page-table entries outlive the jobs in flight): only then can a job still running reach
  // its pages (VMM thread).
  void note_gpu_mapped() { gpu_mapped_ = true; }
  bool gpu_mapped_once() const { return gpu_mapped_; }
  // Ends every host-side use of the guest's pages (see the top). Idempotent; VMM thread.
  void revoke();
  bool revoked() const;

  // The registry that owns this object's handles (closes them when the object dies).
  void set_registry(std::shared_ptr<ObjectRegistry> r) { registry_ = std::move(r); }
  uint64_t blob_id() const { return blob_id_; }
  void set_blob_id(uint64_t id) { blob_id_ = id; }
  // Kernel objects behind it (userptr handles, udmabuf imports): what the object quota counts.
  uint32_t kernel_objects() const { return static_cast<uint32_t>(segments_.size()); }

  // Resources that must live as long as the handles.
  // Taken only once there is room for it: if that fails the caller still holds `m`, which must
  // outlive the handles, so the caller's order of destruction stands.
  void keep_alive(Mapping &&m) {
    kept_mappings_.reserve(kept_mappings_.size() + 1);
    kept_mappings_.push_back(std::move(m));
  }

  // The quota charge, returned once this object and every holder of charge_share() are gone: an
  // exported BO's memory lives on in the VMM's dma-buf after the context lets go of the object
  // (detach, BO_FREE, context destroy), and stays charged until the VMM drops its resource.
  void set_charge(Charge c) { charge_ = std::make_shared<Charge>(std::move(c)); }
  std::shared_ptr<const void> charge_share() const { return charge_; }
  // An import of memory another context of ours made holds that context's charge for it (its
  // charge_share()): the import keeps the memory alive, so the exporter's quota keeps counting
  // it after the exporter and the VMM let go of it, until this object dies too.
  void hold_exporter_charge(std::shared_ptr<const void> c) {
    if (!exporter_charge_) exporter_charge_ = std::move(c);
  }
  void set_bo_flags(uint32_t flags) { bo_flags_ = flags; }
  uint32_t bo_flags() const { return bo_flags_; }

 private:
  // Closes the kernel handles this object owns. Allocates nothing: it runs in the destructor and
  // in revoke(), which a detach and a context's end rely on.
  void release_handles();
  std::shared_ptr<AmdgpuDevice> dev_;
  Kind kind_;
  uint32_t domain_;
  std::vector<Segment> segments_;
  uint64_t size_ = 0;
  bool read_only_;
  uint32_t bo_flags_ = 0;
  std::vector<Mapping> kept_mappings_;
  std::weak_ptr<Mapping> cpu_map_;  // host_range()'s holders own it
  std::shared_ptr<Charge> charge_;
  std::shared_ptr<const void> exporter_charge_;
  uint64_t blob_id_ = 0;
  std::shared_ptr<ObjectRegistry> registry_;
  mutable std::mutex guest_mu_;  // orders write_guest() against revoke()
  bool revoked_ = false;
  bool kernel_released_ = false;
  bool gpu_mapped_ = false;
  std::vector<GuestRange> guest_ranges_;
};

}  // namespace rvgl
