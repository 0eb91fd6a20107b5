// One context's virtio-gpu context fences: retired in order per ring once what each waits for is
// reached, delivered exactly once each.
//
// Delivery (DESIGN.md D1): with ASYNC_FENCE_CB the VMM's callback runs on whichever thread saw the
// progress (the completion engine's, an SPM worker's, or the VMM's own when the work was already
// done at create time); otherwise completed fences are queued, the poll fd (an eventfd) becomes
// readable, and poll() delivers them on the VMM's thread, as vtest requires. Callbacks are
// serialised, so fences of one ring reach the VMM in order.
//
// In poll mode the completion engine also registers the poll fd itself with the kernel for the
// point it waits for (direct_wake_fd()), so the kernel wakes the VMM's thread when the GPU gets
// there, with no hop through the engine's thread; poll() then asks the timelines of the rings it
// finds waiting (refresh()) rather than only taking what the engine already queued — but only
// while the gate (the context's health owner) says its next look at completed work would be
// deferred anyway, so that a guest sees no less of a failed job's classification than it would
// through the engine (queue_health.h: health first, when a check is due).
//
// Threads: add/poll on the VMM's thread; progress() on any thread; mu_ owns the rings and the
// ready list, deliver_mu_ is held while callbacks run (docs/threads.md).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "queue/fence_source.h"
#include "rocm_virgl_protocol.h"
#include "util/unique_fd.h"

namespace rvgl {

class FenceDelivery {
 public:
  using Callback = std::function<void(uint32_t ring_idx, uint64_t fence_id)>;

  static std::unique_ptr<FenceDelivery> create(bool async, Callback cb, int *err);
  ~FenceDelivery();  // fences still pending are dropped, never delivered

  // The fence retires once `source` reaches `point`; a null source means "as soon as every
  // earlier fence of this ring has retired". Mergeable fences (VIRGL_RENDERER_FENCE_FLAG_MERGEABLE)
  // may be observed late, together with later work (see arm points in queue_watch.h); each is still
  // delivered.
  void add(uint32_t ring_idx, uint64_t fence_id, std::shared_ptr<const FenceSource> source,
           uint64_t point, bool mergeable);

  // Delivers (or queues for poll) every fence whose point is now reached. Any thread.
  void progress();

  // The lowest point a non-mergeable fence waits for on `source` (0: none): the point a watch on
  // that source must wake for.
  uint64_t first_exact_point(const FenceSource *source) const;
  // Whether any pending fence still waits on `source`.
  bool references(const FenceSource *source) const;

  int poll_fd() const { return event_fd_.get(); }
  // The fd the kernel may signal directly when a watched point is reached: the poll fd in poll
  // mode, -1 with async callbacks (the engine's thread delivers those itself).
  int direct_wake_fd() const { return async_ ? -1 : event_fd_.get(); }
  // VMM thread, before the first poll(): whether poll() may take progress the engine has not
  // seen yet (see above). Without a gate it never does.
  void set_direct_gate(std::function<bool()> gate) { direct_gate_ = std::move(gate); }
  void poll();

  // After stop() returns no callback runs or will run, whatever thread asks.
  void stop();

  uint64_t delivered() const;
  size_t pending() const;

 private:
  struct Pending {
    uint64_t fence_id;
    std::shared_ptr<const FenceSource> source;
    uint64_t point;
    bool mergeable;
  };
  struct Done {
    uint32_t ring;
    uint64_t fence_id;
  };

  FenceDelivery(bool async, Callback cb) : async_(async), cb_(std::move(cb)) {}
  // Takes every fence that is now reached off the rings (mu_ held); with `refresh`, a front fence
  // not known reached asks its source once.
  template <class Out>
  void collect_locked(Out *done, bool refresh = false);
  void signal_poll_fd();

  const bool async_;
  Callback cb_;
  std::function<bool()> direct_gate_;  // VMM thread only
  UniqueFd event_fd_;

  mutable std::mutex mu_;
  std::deque<Pending> rings_[RVGL_RING_COUNT];
  uint64_t busy_rings_ = 0;  // bit per ring with pending fences
  std::deque<Done> ready_;   // poll mode: waiting for poll()
  uint64_t delivered_ = 0;
  bool stopped_ = false;
  bool again_ = false;  // progress asked for while a delivery was running

  std::mutex deliver_mu_;
};

}  // namespace rvgl
