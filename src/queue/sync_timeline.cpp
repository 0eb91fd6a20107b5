#include "queue/sync_timeline.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>
#include <new>
#include <thread>

#include "util/monotonic_clock.h"

namespace rvgl {

std::shared_ptr<SyncTimeline> SyncTimeline::create(std::shared_ptr<AmdgpuDevice> dev, int *err) {
  uint32_t h;
  *err = dev->syncobj_create(0, &h);
  if (*err) return nullptr;
  // Out of memory for the object, the handle would have no owner: it goes back first. Once the
  // object holds it, its destructor does (the shared_ptr's own allocation failing leaves the
  // object with the unique_ptr).
  std::unique_ptr<SyncTimeline> owned;
  try {
    owned.reset(new SyncTimeline(dev, h));
  } catch (const std::bad_alloc &) {
    dev->syncobj_destroy(h);
    throw;
  }
  return std::shared_ptr<SyncTimeline>(std::move(owned));
}

SyncTimeline::~SyncTimeline() {
  dev_->syncobj_destroy(handle_);
}

int SyncTimeline::signal(uint64_t point) {
  // The host did the work, so the point is reached whatever the kernel answers: a fence waiting
  // for it (the SPM ring's) is delivered from what is known, and must not wait forever on a
  // syncobj that could not be told.
  note_reached(point);
  int r = 0;
  for (int attempt = 0; attempt < 3; ++attempt)
    if ((r = dev_->syncobj_timeline_signal(handle_, point)) == 0) return 0;
  return r;
}

int SyncTimeline::query(uint64_t *value) const {
  *value = 0;
  return dev_->syncobj_query(handle_, value);
}

void SyncTimeline::note_reached(uint64_t point) const {
  uint64_t seen = known_.load(std::memory_order_relaxed);
  while (seen < point && !known_.compare_exchange_weak(seen, point, std::memory_order_acq_rel)) {
  }
}

int wait_syncobj_point(AmdgpuDevice &dev, uint32_t handle, uint64_t point, int64_t abs_timeout_ns,
                       uint32_t flags, const SyncTimeline *known) {
  auto reached_without_waiting = [&] {
    if (known && known->known_reached() >= point) return true;
    uint64_t value = 0;
    return dev.syncobj_query(handle, &value) == 0 && value >= point;
  };
  for (;;) {
    if (known && known->known_reached() >= point) return 0;
    const int r =
        dev.syncobj_timeline_wait({&handle, 1}, {&point, 1}, abs_timeout_ns, flags, nullptr);
    if (r == 0 || r == -ETIME) return r;
    if (r == -EINVAL && !(flags & DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT)) return r;
    const int64_t now = monotonic_ns();
    if (now >= abs_timeout_ns) return -ETIME;
    // Refused, not timed out: ending here would hand guest pages back under running work, or
    // make a caller that loops on this spin.
    if (reached_without_waiting()) return 0;
    std::this_thread::sleep_for(
        std::chrono::nanoseconds(std::min<int64_t>(kRefusedWaitRetryNs, abs_timeout_ns - now)));
  }
}

}  // namespace rvgl
