// A guest's ROCm compute context: the one object vrend-hooks talks to for a context id of ours.
//
// It owns a private amdgpu device fd (its own GPU VM), decodes the guest's command stream through
// one dispatch table, and keeps every guest-visible name (objects, resources, queues, VA ranges)
// in per-context tables. The VMM calls it from one thread at a time; only the fence retirer runs
// on a thread of its own (DESIGN.md D9).
#pragma once

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <mutex>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "amdgpu/amdgpu_device.h"
#include "context/capset_assembly.h"
#include "events/event_ring.h"
#include "context/capture_writer.h"
#include "context/command_table.h"
#include "context/config.h"
#include "context/frame_decoder.h"
#include "memory/usage.h"
#include "memory/handle_table.h"
#include "memory/memory_object.h"
#include "memory/resident_set.h"
#include "memory/shared_page.h"
#include "memory/userptr_import.h"
#include "memory/va_space.h"
#include "queue/fence_retirer.h"
#include "queue/kernel_queue.h"
#include "queue/user_queue.h"
#include "spm/spm_session.h"
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
};

// Counters a test or benchmark may read.
struct ContextStats {
  uint32_t bos = 0;
  uint32_t resources = 0;
  uint32_t queues = 0;
  uint32_t va_mappings = 0;
  UsageSnapshot usage;
  UserptrStrategy last_userptr_strategy = UserptrStrategy::kStitched;
  uint32_t last_userptr_objects = 0;
};

class ComputeContext {
 public:
  struct Options {
    uint32_t ctx_id = 0;
    const Config *config = nullptr;
    UniqueFd drm_fd;            // the VMM's choice (get_drm_fd); else config / first node
    bool async_fences = false;  // VMM set VIRGL_RENDERER_ASYNC_FENCE_CB
    FenceRetirer::Callback on_fence;
  };

  // The RVGL_FEATURE_* bits this build implements.
  static uint64_t implemented_features();

  // Opens the configured device (or the first amdgpu node) and fills the capset a guest reads.
  static int probe_capset(const Config &cfg, rvgl_capset *out);

  static std::unique_ptr<ComputeContext> create(Options opts, int *err);
  ~ComputeContext();
  ComputeContext(const ComputeContext &) = delete;
  ComputeContext &operator=(const ComputeContext &) = delete;

  // A command buffer from the guest: 0, or -EINVAL when a frame could not be parsed.
  int submit_cmd(std::span<const uint8_t> cmds);

  // RESOURCE_CREATE_BLOB for this context: the shared page, a BO claim, or a userptr blob.
  int create_blob(const BlobArgs &args, BlobExport *out);
  // A resource of another context type, imported from its dma-buf.
  int attach_foreign(uint32_t res_id, UniqueFd dmabuf, uint64_t size);
  // The resource is gone from this context (detach or unref): its name is dropped, and userptr
  // memory stops being GPU-visible.
  void detach_resource(uint32_t res_id);
  bool has_resource(uint32_t res_id) const { return resources_.count(res_id) != 0; }
  int export_resource(uint32_t res_id, BlobExport *out);

  int create_fence(uint32_t ring_idx, uint64_t fence_id);
  int poll_fd() const { return retirer_->poll_fd(); }
  void poll() { retirer_->poll(); }

  const rvgl_capset &capset() const { return facts_.capset; }
  uint32_t ctx_id() const { return ctx_id_; }
  ContextStats stats() const;
  const FenceRetirer &retirer() const { return *retirer_; }
  // The capture file, when RVGL_CAPTURE_DIR is set ("" otherwise).
  std::string capture_path() const { return capture_ ? capture_->path() : std::string(); }

 private:
  struct Resource {
    enum class Kind { kSharedPage, kBo, kUserptr, kForeign } kind;
    std::shared_ptr<MemoryObject> object;  // null for the shared page
  };
  struct Queue {
    std::shared_ptr<KernelQueue> kernel;  // shared with the retire thread's health checks
    std::unique_ptr<UserQueue> user;
    uint32_t ring_idx = 0;
  };
  enum class RingUse : uint8_t { kFree, kQueue, kSpm };

  explicit ComputeContext(const Options &opts);
  static const CommandTable &table();

  // ---- handlers (handlers_*.cpp) ----
  int32_t cmd_nop(const Request &, Response &);
  int32_t cmd_query_info(const Request &, Response &);
  int32_t cmd_bo_create(const Request &, Response &);
  int32_t cmd_bo_free(const Request &, Response &);
  int32_t cmd_va_map(const Request &, Response &);
  int32_t cmd_va_unmap(const Request &, Response &);
  int32_t cmd_queue_create(const Request &, Response &);
  int32_t cmd_queue_destroy(const Request &, Response &);
  int32_t cmd_submit(const Request &, Response &);
  int32_t cmd_queue_state(const Request &, Response &);
  int32_t cmd_spm_acquire(const Request &, Response &);
  int32_t cmd_spm_release(const Request &, Response &);
  int32_t cmd_spm_set_dest(const Request &, Response &);

  // ---- helpers ----
  // The object named by exactly one of bo / res_id; -EINVAL / -ENOENT otherwise.
  int lookup_object(uint32_t bo, uint32_t res_id, std::shared_ptr<MemoryObject> *out) const;
  void unmap(const VaMapping &m);
  void unmap_object(const MemoryObject *obj);
  int create_shared_page(const BlobArgs &args, BlobExport *out);
  int claim_bo(const BlobArgs &args, BlobExport *out);
  int create_userptr(const BlobArgs &args, BlobExport *out);
  int export_object(const MemoryObject &obj, BlobExport *out);
  int spm_check(uint32_t xcp) const;
  void release_spm(uint32_t xcp);
  uint64_t device_key() const;
  // Looks at a kernel queue's health and posts an event for each condition seen for the first
  // time (any thread: the retire thread when its work drains, the VMM's on QUEUE_STATE).
  void check_queue(uint32_t handle, KernelQueue &q);
  void on_queue_drained(uint32_t handle);
  void post_event(uint32_t type, uint32_t queue, uint64_t p0, uint64_t p1);

  uint32_t ctx_id_;
  const Config &config_;
  const ContextLimits &limits_;
  std::shared_ptr<AmdgpuDevice> dev_;
  DeviceFacts facts_;
  std::shared_ptr<Usage> usage_;
  FrameDecoder decoder_;
  std::unique_ptr<SharedPage> shmem_;
  ShmemView no_shmem_;
  HandleTable<MemoryObject> bos_;
  std::unordered_map<uint64_t, std::shared_ptr<MemoryObject>> parked_blobs_;
  std::unordered_set<uint64_t> used_blob_ids_;
  std::unordered_map<uint32_t, Resource> resources_;
  VaSpace va_;
  ResidentSet resident_;
  HandleTable<Queue> queues_;
  std::array<RingUse, RVGL_RING_COUNT> rings_{};
  std::array<uint32_t, RVGL_RING_COUNT> ring_queue_{};
  std::unique_ptr<FenceRetirer> retirer_;
  std::unique_ptr<EventRing> events_;  // with the shared page
  // Kernel queues the retire thread may look at, by handle (queues_ is the VMM thread's).
  std::mutex health_mu_;
  std::unordered_map<uint32_t, std::shared_ptr<KernelQueue>> health_queues_;
  std::mutex fault_mu_;
  rvgl_drm_amdgpu_info_gpuvm_fault last_fault_{};
  std::atomic<bool> vram_lost_reported_{false};
  std::array<std::unique_ptr<SpmSession>, 1> spm_;  // per XCP of the context's node
  std::unique_ptr<CaptureWriter> capture_;          // RVGL_CAPTURE_DIR
  UserptrStrategy last_userptr_strategy_ = UserptrStrategy::kStitched;
  uint32_t last_userptr_objects_ = 0;
};

}  // namespace rvgl
