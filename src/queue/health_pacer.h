// How often queue health may be looked at, for the whole process (docs/threads.md).
//
// A look at one queue can cost two ioctls (its job error, its kernel context's state), and a
// context's check one more for the VM's fault cache; while no job failed and the device was not
// reset, a check's errors are polled in one and its contexts answered by the reset probe, so it
// costs 3 (queue_health.h). Paced per queue when a look cost up to two each: with a fixed 1 ms
// per context, 64 busy
// contexts of 8 queues made 2.9-3.6 emulated ioctls per job instead of 2.1-2.4 (BM_ScaleOps).
// The pacer counts the queues that completed work in the last window (each at most once per
// window, however often it is looked at, so the count does not feed back on the pacing) and
// stretches every context's interval so that all of them together look at about kLooksPerWindow
// queues per window: 1 ms while few queues are busy, 1 ms per kLooksPerWindow busy queues under
// load. Nothing is dropped: a deferred check still runs, only later.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace rvgl {

class HealthPacer {
 public:
  static constexpr int64_t kWindowNs = 1'000'000;
  static constexpr uint64_t kLooksPerWindow = 16;

  static HealthPacer &process();

  // A queue completed work at `now`; `*window` is that queue's own note of the last window it
  // was counted in.
  void note_busy(int64_t now, int64_t *window);
  // The interval between two checks of one context now.
  int64_t interval_ns(int64_t now) const;

 private:
  // Written under mu_ (by the engine's thread, and a poll-mode VMM's thread that saw a
  // completion first); atomics so that interval_ns() reads them without it.
  std::mutex mu_;
  std::atomic<int64_t> window_{-1};
  std::atomic<uint64_t> count_{0};     // busy queues counted in window_
  std::atomic<uint64_t> previous_{0};  // in the window before it
};

}  // namespace rvgl
