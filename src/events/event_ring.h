// Writes event records into the shared page's ring (DESIGN.md D7) without ever blocking: a full
// ring drops the record and counts it in event_overflow. Posting may happen on any of the
// context's threads (retire thread, SPM worker, the VMM's); records are serialised here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "context/shmem_view.h"
#include "queue/sync_timeline.h"
#include "rocm_virgl_protocol.h"

namespace rvgl {

class EventRing {
 public:
  // timeline: point n is signalled once record n is written; kick wakes the fence retirer.
  EventRing(ShmemView view, std::shared_ptr<SyncTimeline> timeline, std::function<void()> kick)
      : view_(view), timeline_(std::move(timeline)), kick_(std::move(kick)) {}

  // false when the record was dropped because the guest has not consumed the ring.
  bool post(uint32_t type, uint32_t queue, uint64_t payload0, uint64_t payload1);

  uint32_t written() const;
  // Records written so far as a timeline point (does not wrap).
  uint64_t points() const;
  uint32_t overflows() const;
  // The guest has records it has not consumed (its event_rptr is behind).
  bool unread() const;
  const std::shared_ptr<SyncTimeline> &timeline() const { return timeline_; }

 private:
  ShmemView view_;
  std::shared_ptr<SyncTimeline> timeline_;
  std::function<void()> kick_;
  mutable std::mutex mu_;
  uint32_t wptr_ = 0;
  uint32_t overflow_ = 0;
  uint64_t points_ = 0;
};

}  // namespace rvgl
