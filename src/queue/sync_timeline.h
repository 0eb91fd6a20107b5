// A timeline syncobj on the context's device: point n is signalled by the GPU (submission n of a
// queue, via a CS signal chunk) or by the host (SPM completions, events, retire-thread wakeups).
// Every ring's completion is one of these, so one blocking wait covers them all.
#pragma once

#include <cstdint>
#include <memory>

#include "amdgpu/amdgpu_device.h"

namespace rvgl {

class SyncTimeline {
 public:
  static std::shared_ptr<SyncTimeline> create(std::shared_ptr<AmdgpuDevice> dev, int *err);
  ~SyncTimeline();
  SyncTimeline(const SyncTimeline &) = delete;
  SyncTimeline &operator=(const SyncTimeline &) = delete;

  uint32_t handle() const { return handle_; }
  // Highest signalled point (0 on error).
  uint64_t value() const;
  // Host-side signal; retried, since a lost signal would leave a waiter asleep.
  int signal(uint64_t point);

 private:
  SyncTimeline(std::shared_ptr<AmdgpuDevice> dev, uint32_t h) : dev_(std::move(dev)), handle_(h) {}
  std::shared_ptr<AmdgpuDevice> dev_;
  uint32_t handle_;
};

}  // namespace rvgl
