// An amdgpu context (DRM_AMDGPU_CTX): per-ring sequence numbers and fences (the scheduler
// entities of amdgpu_ctx.c), and the reset state QUERY_STATE2 reports.
#pragma once

#include <atomic>
#include <compare>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "sync/fence.h"

namespace rvgl::emu {

class RingWorker;

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

  // Set by the job runner when a full reset blamed a job of this context (karma).
  std::atomic<bool> guilty{false};
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
  // old enough to be known signaled; ~0 names the newest job.
  int get_fence(const EntityKey &key, uint64_t seq, std::shared_ptr<Fence> &out);
  // amdgpu_ctx_wait_prev_fence(): the fence in the slot the entity's next job takes,
  // fences[sequence & (amdgpu_sched_jobs - 1)], i.e. that of the job amdgpu_sched_jobs (32)
  // sequence numbers back, while it has not signaled; null otherwise.
  std::shared_ptr<Fence> prev_fence(const EntityKey &key) const;
  // drm_sched_entity_error(): the error of the entity's last job taken off it for the ring
  // (entity->last_scheduled), 0 while that job has not ended or ended without one. Since Linux 6.5
  // amdgpu_ctx_get_entity() answers it to every CS, WAIT_CS, WAIT_FENCES, FENCE_TO_HANDLE and
  // dependency that names the entity, and amdgpu_job_prepare_job() gives it to each job popped
  // after (all errors since 6.11: "drm/amdgpu: Forward soft recovery errors to userspace").
  int entity_error(const EntityKey &key) const;
  int entity_error_locked(const EntityKey &key) const;  // FenceDomain lock held
  // drm_sched_entity_pop_job(): `fence` is the entity's last_scheduled now (FenceDomain lock).
  void set_last_scheduled_locked(const EntityKey &key, std::shared_ptr<Fence> fence);
  // The ring the entity's jobs go to (its drm_gpu_scheduler), set by its first CS.
  void set_worker(const EntityKey &key, RingWorker *worker) { entities_[key].worker = worker; }

  // amdgpu_ctx.refcount (a kref): the file's handle holds one, and so does each ioctl in progress
  // that looked the context up (amdgpu_ctx_get(), e.g. a CS until its end). Whoever drops the last
  // one releases the context (ContextRef::reset()).
  std::atomic<uint32_t> refs{1};
  // amdgpu_ctx_do_release() -> drm_sched_entity_destroy() -> drm_sched_entity_flush() for every
  // entity: waits, without a timeout, until each has handed all its queued jobs to its ring
  // (RingWorker::entity_idle_locked). Only after the last reference went (no CS can add a job),
  // with no lock held.
  void flush_entities();

 private:
  struct Entity {
    uint64_t fence_context = Fence::new_context();
    uint64_t next_seq = 1;
    std::deque<std::pair<uint64_t, std::shared_ptr<Fence>>> fences;
    RingWorker *worker = nullptr;  // the device's, which outlives every open file
  };
  int32_t priority_;
  uint32_t reset_counter_, vram_lost_counter_;
  std::map<EntityKey, Entity> entities_;
  // entity->last_scheduled of each entity that had a job popped: under the FenceDomain lock (the
  // ring workers set it), not the file's context table lock that guards entities_.
  std::map<EntityKey, std::shared_ptr<Fence>> last_scheduled_;
};

// One reference of Context::refs (amdgpu_ctx_get() ... amdgpu_ctx_put()): the last one to go
// releases the context, which may wait (Context::flush_entities), so it must go with no lock held.
class ContextRef {
 public:
  ContextRef() = default;
  // Adopts a reference already counted in ctx->refs.
  explicit ContextRef(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)) {}
  ContextRef(ContextRef &&o) noexcept = default;
  ContextRef &operator=(ContextRef &&o) noexcept {
    if (this != &o) {
      reset();
      ctx_ = std::move(o.ctx_);
    }
    return *this;
  }
  ContextRef(const ContextRef &) = delete;
  ContextRef &operator=(const ContextRef &) = delete;
  ~ContextRef() { reset(); }

  // amdgpu_ctx_put(): kref_put(&ctx->refcount, amdgpu_ctx_do_release).
  void reset() {
    if (ctx_ && ctx_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) ctx_->flush_entities();
    ctx_.reset();
  }
  explicit operator bool() const { return ctx_ != nullptr; }
  Context *operator->() const { return ctx_.get(); }
  Context &operator*() const { return *ctx_; }
  const std::shared_ptr<Context> &shared() const { return ctx_; }

 private:
  std::shared_ptr<Context> ctx_;
};

}  // namespace rvgl::emu
