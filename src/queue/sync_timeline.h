// A timeline syncobj on the context's device: point n is signalled by the GPU (submission n of a
// queue, via a CS signal chunk) or by the host (SPM completions, events, retire-thread wakeups).
// Every ring's completion is one of these, so one blocking wait covers them all.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "amdgpu/amdgpu_device.h"
#include "queue/fence_source.h"

namespace rvgl {

class SyncTimeline final : public FenceSource {
 public:
  static std::shared_ptr<SyncTimeline> create(std::shared_ptr<AmdgpuDevice> dev, int *err);
  ~SyncTimeline();
  SyncTimeline(const SyncTimeline &) = delete;
  SyncTimeline &operator=(const SyncTimeline &) = delete;

  uint32_t handle() const { return handle_; }
  // Highest signalled point, asked of the kernel; 0 or -errno. It makes nothing known: a point
  // made known (note_reached) lets a context fence retire inline, so only the callers
  // docs/threads.md names make it known, after the health owner saw it or when it would defer.
  int query(uint64_t *value) const;
  // A point known to be signalled without asking the kernel: the highest one a wait or a query
  // has seen. Lets the completion engine arm its next wait without a query ioctl between.
  uint64_t known_reached() const { return known_.load(std::memory_order_acquire); }
  void note_reached(uint64_t point) const;
  uint64_t reached() const override { return known_reached(); }
  // Host-side signal; retried, since a lost signal would leave a kernel waiter asleep. The point
  // is known reached at once, even when the kernel refused it (then -errno): what is known is
  // what delivery reads.
  int signal(uint64_t point);
  const std::shared_ptr<AmdgpuDevice> &device() const { return dev_; }

 private:
  SyncTimeline(std::shared_ptr<AmdgpuDevice> dev, uint32_t h) : dev_(std::move(dev)), handle_(h) {}
  std::shared_ptr<AmdgpuDevice> dev_;
  uint32_t handle_;
  mutable std::atomic<uint64_t> known_{0};
};

// Waits for `point` of syncobj `handle` of `dev` until abs_timeout_ns (CLOCK_MONOTONIC): 0 once
// it has signalled, -ETIME at the deadline, and without DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT
// -EINVAL when nobody has added the point. A wait the kernel refuses otherwise (out of memory,
// say) says nothing of the point: it is asked again every kRefusedWaitRetryNs until the deadline,
// and the syncobj's value is asked in between, as is what `known` (when given: the same
// syncobj's SyncTimeline) knows reached, since what another thread sees reached may not move
// meanwhile. Allocates nothing.
constexpr int64_t kRefusedWaitRetryNs = 1'000'000;
int wait_syncobj_point(AmdgpuDevice &dev, uint32_t handle, uint64_t point, int64_t abs_timeout_ns,
                       uint32_t flags, const SyncTimeline *known = nullptr);

}  // namespace rvgl
