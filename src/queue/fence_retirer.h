// Retires virtio-gpu context fences in order per ring when the work they follow is done.
//
// One thread per context sleeps in a single syncobj wait over the head fence of every ring plus a
// wakeup timeline (no polling). Completed fences are delivered either from that thread (the VMM
// set ASYNC_FENCE_CB) or queued: the poll fd (an eventfd) becomes readable and poll() delivers
// them on the VMM's thread, as vtest requires.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "queue/sync_timeline.h"
#include "rocm_virgl_protocol.h"
#include "util/unique_fd.h"

namespace rvgl {

class FenceRetirer {
 public:
  using Callback = std::function<void(uint32_t ring_idx, uint64_t fence_id)>;
  // Runs on the retire thread when a watched timeline reaches its point.
  using WatchCallback = std::function<void(uint32_t key)>;

  // async: deliver from the retire thread; else through poll_fd()/poll().
  static std::unique_ptr<FenceRetirer> create(std::shared_ptr<AmdgpuDevice> dev, bool async,
                                              Callback cb, int *err);
  ~FenceRetirer();  // stops the thread; fences still pending are dropped, never delivered

  // The fence retires once `timeline` reaches `point`; a null timeline means "as soon as every
  // earlier fence of this ring has retired".
  void add(uint32_t ring_idx, uint64_t fence_id, std::shared_ptr<SyncTimeline> timeline,
           uint64_t point);

  int poll_fd() const { return event_fd_.get(); }
  void poll();  // delivers queued fences on the caller's thread (non-async mode)

  // Wakes the thread to re-check (a host-signalled timeline moved).
  void kick();

  // Calls the watch callback with `key` once `timeline` reaches `point` (a later watch of the same
  // key replaces an earlier one). Used to look at a queue's health whenever its work drains,
  // whether or not the guest asked for a fence.
  void set_watch_callback(WatchCallback cb);
  void watch(uint32_t key, std::shared_ptr<SyncTimeline> timeline, uint64_t point);
  void unwatch(uint32_t key);

  // Counters for tests and benchmarks.
  uint64_t delivered() const;
  size_t pending() const;

 private:
  struct Pending {
    uint64_t fence_id;
    std::shared_ptr<SyncTimeline> timeline;
    uint64_t point;
  };
  struct Done {
    uint32_t ring;
    uint64_t fence_id;
  };

  FenceRetirer(std::shared_ptr<AmdgpuDevice> dev, bool async, Callback cb)
      : dev_(std::move(dev)), async_(async), cb_(std::move(cb)) {}
  void run();
  void collect_done(std::vector<Done> *done);
  void collect_watches(std::vector<uint32_t> *fired);
  void deliver(std::vector<Done> &done);

  std::shared_ptr<AmdgpuDevice> dev_;
  const bool async_;
  Callback cb_;
  std::shared_ptr<SyncTimeline> wake_;
  UniqueFd event_fd_;

  mutable std::mutex mu_;
  std::deque<Pending> rings_[RVGL_RING_COUNT];
  std::deque<Done> ready_;  // non-async mode: waiting for poll()
  struct Watch {
    std::shared_ptr<SyncTimeline> timeline;
    uint64_t point;
  };
  std::map<uint32_t, Watch> watches_;
  WatchCallback watch_cb_;
  uint64_t wake_point_ = 0;
  uint64_t delivered_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace rvgl
