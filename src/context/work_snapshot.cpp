// ComputeContext::work_snapshot and WorkSnapshot: what global fences wait for (work_snapshot.h).
// In a file of its own so the context's main file stays the queue owner's alone.
#include "context/work_snapshot.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>

#include "context/compute_context.h"
#include "util/monotonic_clock.h"

namespace rvgl {

namespace {

void add_unfinished(const KernelQueue &q, std::vector<WorkSnapshot::Point> *points) {
  const uint64_t last = q.last_submitted();
  const auto &tl = q.timeline();
  if (last == 0 || tl->known_reached() >= last) return;
  points->push_back({tl, last});
}

// Known reached, or the kernel says so now (one SYNCOBJ_QUERY). Asked, never made known: the
// callers run on the VMM's or the router's thread, not the health owner's. A failed query: not
// known reached.
bool reached_now(const SyncTimeline &tl, uint64_t point) {
  if (tl.known_reached() >= point) return true;
  uint64_t v;
  return tl.query(&v) == 0 && v >= point;
}

}  // namespace

WorkSnapshot ComputeContext::work_snapshot() const {
  std::vector<WorkSnapshot::Point> points;
  for_each_kernel_queue([&](const KernelQueue &q) { add_unfinished(q, &points); });
  if (points.empty()) return {};
  return WorkSnapshot(dev_, std::move(points));
}

bool WorkSnapshot::reached() {
  points_.erase(std::remove_if(points_.begin(), points_.end(),
                               [](const Point &p) { return reached_now(*p.timeline, p.point); }),
                points_.end());
  return points_.empty();
}

bool WorkSnapshot::wait(int64_t abs_timeout_ns) {
  // One point at a time: all are waited for anyway, and nothing is allocated (a detach and a
  // context's end wait here, and must not fail for want of memory).
  for (const Point &p : points_)
    if (!wait_for_point(*dev_, *p.timeline, p.point, abs_timeout_ns)) break;
  return reached();
}

bool wait_for_point(AmdgpuDevice &dev, const SyncTimeline &timeline, uint64_t point,
                    int64_t abs_timeout_ns) {
  return wait_syncobj_point(
             dev, timeline.handle(), point, abs_timeout_ns,
             DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL | DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
             &timeline) == 0;
}

void ComputeContext::wait_for_submitted_work(int64_t abs_timeout_ns) const {
  for_each_kernel_queue([&](const KernelQueue &q) {
    if (q.last_submitted())
      wait_for_point(*dev_, *q.timeline(), q.last_submitted(), abs_timeout_ns);
  });
}

}  // namespace rvgl
