// The GPU work a context had submitted at one moment: for each kernel queue with work (a
// destroyed one whose jobs may still run included), its timeline and the last point submitted.
// vrend-hooks takes one per ROCM context when the VMM creates a global (ctx0) fence, and holds
// the fence until every snapshot is reached, so a VMM without context fences (callbacks version 1
// or 2) never sees a fence retire before ROCm work submitted ahead of it (issue 15, point 1). The
// context takes one when it hands back guest pages the GPU VM mapped (guest_page_release.cpp).
//
// Taken on the VMM's thread (it reads the context's queue table); asked and waited on from any
// thread: it holds its own references to the timelines and the device, so it outlives the
// context that produced it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "amdgpu/amdgpu_device.h"
#include "queue/sync_timeline.h"

namespace rvgl {

class WorkSnapshot {
 public:
  struct Point {
    std::shared_ptr<SyncTimeline> timeline;
    uint64_t point = 0;
  };

  WorkSnapshot() = default;
  WorkSnapshot(std::shared_ptr<AmdgpuDevice> dev, std::vector<Point> points)
      : dev_(std::move(dev)), points_(std::move(points)) {}

  // Nothing to wait for (no kernel queue had unfinished work when it was taken).
  bool empty() const { return points_.empty(); }
  size_t size() const { return points_.size(); }

  // Every point reached? Points found reached are dropped, so asking again costs only what is
  // still outstanding; a point already seen reached by anyone costs no ioctl.
  bool reached();

  // Blocks until reached() or abs_timeout_ns (CLOCK_MONOTONIC); true when reached.
  bool wait(int64_t abs_timeout_ns);

 private:
  std::shared_ptr<AmdgpuDevice> dev_;
  std::vector<Point> points_;
};

// Blocks until timeline reaches point or abs_timeout_ns (CLOCK_MONOTONIC); true when reached.
// Allocates nothing. A wait the kernel refuses is asked again (wait_syncobj_point).
bool wait_for_point(AmdgpuDevice &dev, const SyncTimeline &timeline, uint64_t point,
                    int64_t abs_timeout_ns);

}  // namespace rvgl
