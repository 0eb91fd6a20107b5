// Writes event records into the shared page's ring (DESIGN.md D7) without ever blocking: a full
// ring drops the record and counts it in event_overflow. The ring exists from the context's
// creation; the shared page is attached when the guest creates it (records posted before that
// have nowhere to go and are counted in dropped_unattached()).
//
// Threads: post() on any thread (the health owner on the completion engine's thread, an SPM
// worker, the VMM's); mu_ owns the view, the write index and the counters. notify() tells fence
// delivery that the record count moved; it is separate so a poster may post under its own lock
// and notify after releasing it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>

#include "context/shmem_view.h"
#include "queue/fence_source.h"
#include "rocm_virgl_protocol.h"

namespace rvgl {

class EventRing final : public FenceSource {
 public:
  explicit EventRing(std::function<void()> notify) : notify_(std::move(notify)) {}

  void attach(ShmemView view);
  bool attached() const;

  // false when the record was dropped (ring full, or no shared page yet).
  bool post(uint32_t type, uint32_t queue, uint64_t payload0, uint64_t payload1);
  void notify() const {
    if (notify_) notify_();
  }

  uint32_t written() const;
  // Records written so far as a point (does not wrap): the events ring's fence source.
  uint64_t points() const { return points_.load(std::memory_order_acquire); }
  uint64_t reached() const override { return points(); }
  uint32_t overflows() const;
  uint32_t dropped_unattached() const;
  // The point a fence created now on the events ring waits for, from one look under the ring's
  // lock (a record posted between two looks would make the fence wait for the one after it): 0
  // while the guest has unread records or no shared page (the fence retires at once), else the
  // next record's.
  uint64_t fence_point() const;

 private:
  std::function<void()> notify_;
  mutable std::mutex mu_;
  ShmemView view_;
  bool attached_ = false;
  uint32_t wptr_ = 0;
  uint32_t overflow_ = 0;
  uint32_t unattached_ = 0;
  std::atomic<uint64_t> points_{0};
};

}  // namespace rvgl
