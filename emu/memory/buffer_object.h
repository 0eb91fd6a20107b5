// One GEM object: its backing pages, where it was created, its fake mmap offset and what userspace
// attached to it (metadata, placement). Handles in a file's table point here.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "memory/backing.h"
#include "memory/memory_account.h"

namespace rvgl::emu {

class Fence;
class GpuVm;

// A fence in an object's reservation, with the VM whose submission added it: amdgpu's implicit
// sync tells a file's own work from others' by that owner (amdgpu_sync_test_fence).
struct ResvFence {
  std::shared_ptr<Fence> fence;
  const GpuVm *owner = nullptr;
};

struct BoMetadata {
  uint64_t flags = 0;
  uint64_t tiling_info = 0;
  uint32_t size = 0;
  uint32_t data[64] = {};
};

class BufferObject {
 public:
  struct Params {
    int device = -1;  // index of the node it belongs to
    std::shared_ptr<Backing> backing;
    std::shared_ptr<MemoryAccount> account;
    MemoryAccount::Pool pool = MemoryAccount::Pool::None;  // what was charged
    uint64_t size = 0;
    uint64_t alignment = 0;
    uint64_t domains = 0;       // preferred domains as requested
    uint64_t domain_flags = 0;  // AMDGPU_GEM_CREATE_*
    bool userptr = false;
    bool imported = false;
    uint64_t owner_file = 0;  // VM_ALWAYS_VALID: the file whose VM it is bound to
    // For an import of another device's dma-buf: the exporting object (a dma-buf keeps it alive,
    // and exporting the import again hands out the original dma-buf).
    std::shared_ptr<BufferObject> origin;
  };
  explicit BufferObject(Params p);
  ~BufferObject();
  BufferObject(const BufferObject &) = delete;
  BufferObject &operator=(const BufferObject &) = delete;

  uint64_t id() const { return id_; }
  int device() const { return p_.device; }
  uint64_t size() const { return p_.size; }
  const std::shared_ptr<Backing> &backing() const { return p_.backing; }
  bool userptr() const { return p_.userptr; }
  bool imported() const { return p_.imported; }
  uint64_t domain_flags() const { return p_.domain_flags; }
  uint64_t alignment() const { return p_.alignment; }
  uint64_t owner_file() const { return p_.owner_file; }
  const std::shared_ptr<BufferObject> &origin() const { return p_.origin; }
  uint64_t current_domain() const;

  // Guarded by the emulator state lock.
  uint64_t preferred_domains() const { return p_.domains; }
  void set_preferred_domains(uint64_t d) { p_.domains = d; }
  BoMetadata metadata;

  // The fake offset GEM_MMAP returns; mmap of a device fd at it maps this object.
  uint64_t mmap_offset() const { return mmap_offset_; }
  void set_mmap_offset(uint64_t o) { mmap_offset_ = o; }

  // Fences of submissions that listed this object (GEM_WAIT_IDLE, implicit sync); guarded by the
  // fence lock.
  std::vector<ResvFence> fences;

 private:
  Params p_;
  uint64_t id_;
  uint64_t mmap_offset_ = 0;
};

// A BO list object (AMDGPU_BO_LIST, or a CS's BO_HANDLES chunk): immutable once made and
// shared by reference, as the kernel's refcounted struct amdgpu_bo_list is (amdgpu_bo_list_get()
// in a CS takes a reference; OP_UPDATE swaps in a new list, amdgpu_bo_list_ioctl()).
using BoList = std::shared_ptr<const std::vector<std::shared_ptr<BufferObject>>>;

}  // namespace rvgl::emu
