// An amdgpu context (DRM_AMDGPU_CTX): per-ring sequence numbers and fences (the scheduler
// entities of amdgpu_ctx.c), and the reset state QUERY_STATE2 reports.
#pragma once

#include <atomic>
#include <compare>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>

#include "sync/fence.h"

namespace rvgl::emu {

struct EntityKey {
  uint32_t ip = 0, instance = 0, ring = 0;
  auto operator<=>(const EntityKey &) const = default;
};

class Context {
 public:
  Context(int32_t priority, uint32_t reset_counter, uint32_t vram_lost_counter);
  ~Context();

  int32_t priority() const { return priority_; }
  uint32_t reset_counter_at_create() const { return reset_counter_; }
  uint32_t vram_lost_counter_at_create() const { return vram_lost_counter_; }

  // Set by the job runner when a job of this context faulted or hung.
  std::atomic<bool> guilty{false};
  // This context lost work to a reset of its own (a fault), which other contexts did not see.
  std::atomic<bool> reset_seen{false};
  // Jobs submitted so far (fault injection counts "the Nth job of a context").
  std::atomic<uint64_t> jobs_submitted{0};

  // amdgpu_ctx.c reset_counter_query: the device reset counter the last QUERY_STATE (v1) saw.
  std::atomic<uint32_t> reset_counter_query{0};
  std::atomic<uint32_t> stable_pstate{0};  // AMDGPU_CTX_STABLE_PSTATE_*

  // The fence ring: the lock of the file's context table held (DeviceFile::contexts.mutex(),
  // standing in for the kernel's ctx->ring_lock), whether or not the context is still in it.
  // A new fence for the entity's next job, on the entity's own timeline (its drm_sched_entity's
  // fence context); add_fence() then gives it its sequence number.
  std::shared_ptr<Fence> new_job_fence(const EntityKey &key);
  // Assigns the next sequence number of the entity and remembers its fence.
  uint64_t add_fence(const EntityKey &key, std::shared_ptr<Fence> fence);
  // amdgpu_ctx_get_fence(): -EINVAL for a sequence not yet emitted, 0 with out == nullptr for one
  // old enough to be known signaled.
  int get_fence(const EntityKey &key, uint64_t seq, std::shared_ptr<Fence> &out);

 private:
  struct Entity {
    uint64_t fence_context = Fence::new_context();
    uint64_t next_seq = 1;
    std::deque<std::pair<uint64_t, std::shared_ptr<Fence>>> fences;
  };
  int32_t priority_;
  uint32_t reset_counter_, vram_lost_counter_;
  std::map<EntityKey, Entity> entities_;
};

}  // namespace rvgl::emu
