// A kernel context of the health owner's own, which never runs work, so a health check can ask
// once whether the device was reset instead of asking every queue's context.
//
// Why it can stand in for them: every flag QUERY_STATE2 reports without a failed job of the
// queue's own follows a move of the device's reset counter. RESET and VRAMLOST compare device
// counters with the context's copies taken at creation (amdgpu_ctx_query2()); VRAM is lost only
// in a full reset, which moves the reset counter; GUILTY is set by the reset paths
// (drm_sched_increase_karma() from amdgpu_device_gpu_recover(); soft recovery and the per-ring
// reset move the counter too), and a guilty context's jobs fail or are cancelled, which the job
// errors a check reads first show. QUERY_STATE (v1) on this context answers whether that
// counter moved since its previous v1 query (amdgpu_ctx_query(): reset_counter_query), so
// consecutive asks cover consecutive intervals with no gap.
//
// Threads: constructed and destroyed on the VMM's thread (with its QueueHealth), asked only by
// the health owner's checks (one at a time, the completion engine's thread).
#pragma once

#include <cstdint>
#include <memory>

#include "amdgpu/amdgpu_device.h"

namespace rvgl {

class ResetProbe {
 public:
  // Creates the context: it must predate every context it vouches for. Without one (the kernel
  // refused: error()), ask() always answers kUnknown and costs nothing.
  explicit ResetProbe(std::shared_ptr<AmdgpuDevice> dev);
  ~ResetProbe();
  ResetProbe(const ResetProbe &) = delete;
  ResetProbe &operator=(const ResetProbe &) = delete;

  enum class Answer { kNoReset, kReset, kUnknown };
  // Whether the device was reset since the previous ask (the first: since construction). One
  // ioctl, unless there is no context.
  Answer ask();
  // The kernel's answer to creating the context: 0, or its -errno.
  int error() const { return err_; }

 private:
  std::shared_ptr<AmdgpuDevice> dev_;
  uint32_t ctx_id_ = 0;
  int err_ = 0;  // creating ctx_id_: 0, or the kernel's -errno (no context then)
};

}  // namespace rvgl
