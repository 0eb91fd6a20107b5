// The memory side of one compute context: every guest-visible object and resource, the context's
// GPU VA space, the quotas, and the lifetime rules that tie them together (docs/robustness.md,
// "Guest memory lifetimes").
//
// A resource knows its uses: GPU VA mappings (found by object in O(log n)), host writers such as an
// SPM destination (MemoryObject::write_guest), udmabufs and aliases (the object's own). Dropping a
// userptr resource (unref, detach, context destroy) ends all of them before it returns
// (MemoryObject::revoke). Every kernel handle has one owner (ObjectRegistry): importing a dma-buf
// that resolves to a handle already owned — the context's own BO coming back through a re-attach —
// shares that owner instead of making a second one.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>

#include "amdgpu/amdgpu_device.h"
#include "context/config.h"
#include "memory/handle_table.h"
#include "memory/memory_object.h"
#include "memory/object_registry.h"
#include "memory/resident_set.h"
#include "queue/kernel_bo_list.h"
#include "memory/usage.h"
#include "memory/userptr_import.h"
#include "memory/va_space.h"
#include "memory/vm_update_timeline.h"
#include "rocm_virgl_protocol.h"
#include "util/unique_fd.h"

namespace rvgl {

// What RESOURCE_CREATE_BLOB asks of the context.
struct BlobArgs {
  uint32_t res_id = 0;
  uint32_t blob_mem = 0;    // RVGL_BLOB_MEM_*
  uint32_t blob_flags = 0;  // RVGL_BLOB_FLAG_*
  uint64_t blob_id = 0;
  uint64_t size = 0;
  std::span<const iovec> iov;  // GUEST / HOST3D_GUEST: the guest pages, as the VMM maps them
};

// What the VMM gets back for a blob: an fd it owns (or none), its kind and how to map it.
struct BlobExport {
  UniqueFd fd;
  uint32_t fd_type = 0;   // VIRGL_RENDERER_BLOB_FD_TYPE_* (1 dmabuf, 3 shm); 0: no fd
  uint32_t map_info = 0;  // VIRGL_RENDERER_MAP_CACHE_*
  uint64_t size = 0;
  // The memory's quota charge, for whoever keeps `fd` (the VMM's resource): the context's object
  // may go first, the memory behind the fd does not. Null when nothing is charged through it.
  std::shared_ptr<const void> charge;
};

struct MemoryStats {
  uint32_t bos = 0;
  uint32_t resources = 0;
  uint32_t va_mappings = 0;
  uint32_t blob_ids = 0;       // blob ids remembered (those of living objects)
  uint32_t owned_handles = 0;  // kernel handles with an owner
  UsageSnapshot usage;
  UserptrStrategy last_userptr_strategy = UserptrStrategy::kStitched;
  uint32_t last_userptr_objects = 0;
  // Unmaps of guest pages whose page-table update no detach can wait for (VmUpdateTimeline).
  uint64_t vm_updates_untracked = 0;
};

class ContextMemory {
 public:
  ContextMemory(std::shared_ptr<AmdgpuDevice> dev, uint64_t features, const rvgl_capset &cap,
                const ContextLimits &limits);
  // Unmaps everything and revokes every userptr resource: nothing of the guest's memory is used
  // once it returns (the caller stops its SPM sessions first).
  ~ContextMemory();
  ContextMemory(const ContextMemory &) = delete;
  ContextMemory &operator=(const ContextMemory &) = delete;

  // ---- guest commands (handlers_memory.cpp forwards) ----
  int32_t bo_create(const rvgl_req_bo_create &q, rvgl_rsp_bo_create *rsp);
  int32_t bo_free(const rvgl_req_bo_free &q);
  int32_t va_map(const rvgl_req_va_map &q);
  int32_t va_unmap(const rvgl_req_va_unmap &q);

  // ---- the VMM's resources ----
  // RESOURCE_CREATE_BLOB other than the shared page: a BO claim or a userptr blob.
  int create_blob(const BlobArgs &args, BlobExport *out);
  // The shared page's name (its memory is the context's).
  int add_shared_page(uint32_t res_id);
  bool is_shared_page(uint32_t res_id) const;
  // A resource imported from its dma-buf: another context's, or one of ours coming back.
  // `exporter_charge`: the charge of the context of ours that made the memory (null for the real
  // library's resources), held by the import while it lives.
  int attach_foreign(uint32_t res_id, UniqueFd dmabuf, uint64_t size,
                     std::shared_ptr<const void> exporter_charge = nullptr);
  // The resource is gone from this context: its name is dropped and, for userptr memory, every
  // host-side use of the guest's pages ends before this returns.
  void detach_resource(uint32_t res_id);
  // Userptr resources whose pages were ever mapped into the GPU VM: a job submitted while they
  // were may still reach them (the caller waits for such jobs, ComputeContext::detach_resource).
  bool guest_pages_gpu_mapped(uint32_t res_id) const;
  bool any_guest_pages_gpu_mapped() const;
  // Blocks until the page-table updates of every unmap of guest pages so far have run, so no
  // user queue's work reaches them any more (vm_update_timeline.h), or the deadline passes. Only
  // where the capset offers user queues: a kernel queue's work is the caller's to wait for.
  // Allocates nothing.
  void wait_guest_pages_unmapped(int64_t abs_deadline_ns);
  bool has_resource(uint32_t res_id) const { return resources_.count(res_id) != 0; }
  bool free_res_id(uint32_t res_id) const { return res_id != 0 && !resources_.count(res_id); }
  // Not for the shared page (the caller's).
  int export_resource(uint32_t res_id, BlobExport *out);

  // Host memory other than a kernel object that the guest makes the host hold (an SPM bounce
  // buffer), charged as GTT: 0, or -ENOSPC with nothing charged.
  int charge_host_buffer(uint64_t bytes, Charge *out);

  // The object named by exactly one of bo / res_id; -EINVAL / -ENOENT otherwise.
  int lookup_object(uint32_t bo, uint32_t res_id, std::shared_ptr<MemoryObject> *out) const;

  // ---- what the queue side reads ----
  const VaSpace &va() const { return va_; }
  const MemoryObject *bo(uint32_t handle) const { return bos_.get(handle); }
  const HandleTable<MemoryObject> &bos() const { return bos_; }
  // The end of a command buffer: objects unmapped during it leave the kernel's BO list now (one
  // update for the whole buffer).
  void settle_bo_list() {
    if (bo_list_stale_) drop_unmapped_from_bo_list();  // inline: every command buffer asks
  }
  // The resident set as the kernel BO list a CS names (0: empty); an ioctl only when it changed.
  int bo_list(uint32_t *handle) { return bo_list_.sync(resident_, handle); }
  uint64_t bo_list_updates() const { return bo_list_.updates(); }
  UsageSnapshot usage() const { return usage_->snapshot(); }
  const ContextLimits &limits() const { return limits_; }
  MemoryStats stats() const;

 private:
  struct Resource {
    enum class Kind { kSharedPage, kBo, kUserptr, kForeign } kind;
    std::shared_ptr<MemoryObject> object;  // null for the shared page
    // Guest pages a job may still reach: userptr memory that was ever mapped into the GPU VM.
    bool gpu_reachable_guest_pages() const {
      return kind == Kind::kUserptr && object->gpu_mapped_once();
    }
  };

  int claim_bo(const BlobArgs &args, BlobExport *out);
  int create_userptr(const BlobArgs &args, BlobExport *out);
  int export_object(const MemoryObject &obj, BlobExport *out);
  void unmap(const VaMapping &m);
  void forget(const VaMapping &m);  // its kernel mappings and bytes no longer count
  void unmap_object(const MemoryObject *obj);
  void unmap_pieces(const VaMapping &m);  // the kernel's VA only
  void drop_unmapped_from_bo_list();

  std::shared_ptr<AmdgpuDevice> dev_;
  const uint64_t features_;  // RVGL_FEATURE_* of the capset
  const ContextLimits &limits_;
  std::shared_ptr<Usage> usage_;
  std::shared_ptr<ObjectRegistry> registry_;
  HandleTable<MemoryObject> bos_;
  // Created with a blob id and not claimed yet, by blob id.
  std::unordered_map<uint64_t, std::shared_ptr<MemoryObject>> parked_blobs_;
  std::unordered_map<uint32_t, Resource> resources_;
  VaSpace va_;
  // The kernel's list still names objects unmapped since it was last brought up to date: they
  // leave it when the command buffer ends (settle_bo_list(), before the VMM's submit_cmd
  // returns), one update per buffer rather than one per unmap, each as long as the whole resident
  // set. The VMM's own calls that let guest pages go update it at once.
  bool bo_list_stale_ = false;
  uint64_t kernel_mappings_ = 0;  // pieces of every mapping in va_ (limits_.max_va_mappings)
  uint64_t mapped_bytes_ = 0;     // sizes of every mapping in va_ (limits_.max_va_bytes)
  ResidentSet resident_;
  KernelBoList bo_list_;  // the kernel's copy of resident_
  // The unmaps of guest pages, as points the kernel signals once the GPU no longer sees them;
  // null where no user queue can run.
  std::unique_ptr<VmUpdateTimeline> vm_updates_;
  UserptrStrategy last_userptr_strategy_ = UserptrStrategy::kStitched;
  uint32_t last_userptr_objects_ = 0;
};

}  // namespace rvgl
