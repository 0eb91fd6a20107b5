// ComputeContext::work_snapshot and WorkSnapshot: what global fences wait for (work_snapshot.h).
// In a file of its own so the context's main file stays the queue owner's alone.
#include "context/work_snapshot.h"

#include <algorithm>

#include "context/compute_context.h"

namespace rvgl {

namespace {

void add_unfinished(const KernelQueue &q, std::vector<WorkSnapshot::Point> *points) {
  const uint64_t last = q.last_submitted();
  const auto &tl = q.timeline();
  if (last == 0 || tl->known_reached() >= last) return;
  points->push_back({tl, last});
}

}  // namespace

WorkSnapshot ComputeContext::work_snapshot() const {
  std::vector<WorkSnapshot::Point> points;
  queues_.for_each([&](uint32_t, const Queue &q) {
    // User queues: the guest owns the ring and tracks its own progress.
    if (q.kernel) add_unfinished(*q.kernel, &points);
  });
  // A destroyed queue's jobs were submitted ahead too, and may still run (QUEUE_DESTROY).
  for (const auto &d : draining_)
    add_unfinished(d.watch->queue(), &points);
  if (points.empty()) return {};
  return WorkSnapshot(dev_, std::move(points));
}

bool WorkSnapshot::reached() {
  // Asked, never made known: this runs on the VMM's or the router's thread, not the health
  // owner's.
  auto pending = [](const Point &p) {
    if (p.timeline->known_reached() >= p.point) return false;
    uint64_t v;
    return p.timeline->query(&v) != 0 || v < p.point;  // a failed query: not known reached
  };
  points_.erase(
      std::remove_if(points_.begin(), points_.end(), [&](const Point &p) { return !pending(p); }),
      points_.end());
  return points_.empty();
}

bool WorkSnapshot::wait(int64_t abs_timeout_ns) {
  while (!reached()) {
    // All of them at once: the kernel's WAIT_ALL over this device's timelines.
    std::vector<uint32_t> handles;
    std::vector<uint64_t> values;
    handles.reserve(points_.size());
    values.reserve(points_.size());
    for (const auto &p : points_) {
      handles.push_back(p.timeline->handle());
      values.push_back(p.point);
    }
    uint32_t first = 0;
    const int r = dev_->syncobj_timeline_wait(
        handles, values, abs_timeout_ns,
        DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL | DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, &first);
    if (r != 0) return reached();  // timed out (or the device is gone): report what is true now
  }
  return true;
}

}  // namespace rvgl
