// One context's virtio-gpu context fences: retired in order per ring once what each waits for is
// reached, delivered exactly once each.
//
// Delivery (DESIGN.md D1): with ASYNC_FENCE_CB the VMM's callback runs on whichever thread saw the
// progress (the completion engine's, an SPM worker's, or the VMM's own when the work was already
// done at create time); otherwise completed fences are queued, the poll fd (an eventfd) becomes
// readable, and poll() delivers them on the VMM's thread, as vtest requires. Callbacks are
// serialised, so fences of one ring reach the VMM in order.
//
// In poll mode the completion engine registers the poll fd itself with the kernel for the point
// it waits for (direct_wake_fd()), in place of its own eventfd, so the kernel wakes the VMM's
// thread when the GPU gets there, with no hop through the engine's thread. The VMM's thread then
// reports that point (ComputeContext::poll, docs/threads.md "Poll mode without a hop") before
// poll() takes what is known reached.
//
// Threads: add/poll on the VMM's thread; progress() on any thread; mu_ owns the rings and the
// ready list, deliver_mu_ is held while callbacks run (docs/threads.md).
#pragma once

#include <atomic>
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
  // earlier fence of this ring has retired". A mergeable fence
  // (VIRGL_RENDERER_FENCE_FLAG_MERGEABLE) that retires together with the next fence of its ring
  // is reported by that fence alone (the VMM retires every earlier fence of the ring with it);
  // it is never held for later work.
  // Out of memory, a fence the ring has no room for takes the place of the ring's last one
  // (spilled_), waits for what both wait for, and is reported for both, as the VMM retires every
  // earlier fence of a ring with a later one (see collect_locked). A refused fence would be lost,
  // and a guest waiting on a ring's last fence would wait for ever (QEMU ignores create_fence's
  // result). Refused only where the two wait on different timelines (append_locked).
  // Returns the fence's position on its ring (1 for the ring's first fence), 0 if dropped or
  // refused.
  uint64_t add(uint32_t ring_idx, uint64_t fence_id, std::shared_ptr<const FenceSource> source,
               uint64_t point, bool mergeable);

  // Delivers (or queues for poll) every fence whose point is now reached. Any thread.
  void progress();

  // The lowest point a fence waits for on `source` (0: none): the point a watch on that source
  // must wake for.
  uint64_t first_pending_point(const FenceSource *source) const;
  // Whether the fences at positions 1..n of `ring` (add()'s) have all been taken off it (retired
  // or merged). A ring's fences leave in order, so this says in O(1) that a destroyed queue's
  // fences are gone, whatever came after them.
  bool taken_through(uint32_t ring, uint64_t n) const;
  // Fences added and not yet taken off their rings, all rings together.
  uint64_t waiting() const;
  // Fences the VMM has not been given yet: waiting, or (poll mode) queued for its poll(). What
  // bounds this delivery's memory, whether or not the VMM polls.
  uint64_t held() const;

  int poll_fd() const { return event_fd_.get(); }
  // The fd the kernel may signal directly when a watched point is reached: the poll fd in poll
  // mode, -1 with async callbacks (the engine's thread delivers those itself).
  int direct_wake_fd() const { return async_ ? -1 : event_fd_.get(); }
  // Poll mode, VMM thread: consumes the poll fd's wakeups; whether there was one. Whoever drains
  // looks at the points again afterwards, so a completion signalled before the drain is not lost.
  bool drain_poll_fd();
  // Delivers what the engine queued, then what the timelines are known to have reached; with
  // async callbacks, exactly as progress() does. Nothing when called from inside one of this
  // delivery's own callbacks: the outer delivery goes on with its batch.
  void poll();
  // Whether this thread is inside one of this delivery's callbacks (nested deliveries included).
  bool in_callback_here() const;

  // After stop() returns no callback runs or will run, whatever thread asks; called from inside
  // a callback, none after that one either (the rest of its batch is dropped).
  void stop();
  bool stopped() const { return stopped_.load(std::memory_order_relaxed); }

  // Fences taken off their rings: reported to the VMM, queued for poll(), or merged into a later
  // report.
  uint64_t retired() const;
  size_t pending() const;

 private:
  struct Pending {
    uint64_t fence_id;
    std::shared_ptr<const FenceSource> source;
    uint64_t point;
    bool mergeable;
    uint64_t covers = 1;  // this fence and the spilled ones it took the place of
  };
  struct Done {
    uint32_t ring;
    uint64_t fence_id;
  };

  FenceDelivery(bool async, Callback cb) : async_(async), cb_(std::move(cb)) {}
  static bool is_ready(const Pending &p) { return !p.source || p.source->reached() >= p.point; }
  // A ring's fences in order: its deque, then its spilled fence if it has one (mu_ held).
  const Pending *at_locked(uint32_t ring, size_t i) const;
  // False: out of memory, and no room to keep `p` without retiring a fence early.
  bool append_locked(uint32_t ring, Pending p);
  void pop_front_locked(uint32_t ring);
  // Takes every fence that is now known reached off the rings (mu_ held).
  template <class Out>
  void collect_locked(Out *done);
  // collect_locked() into a batch, surviving running out of memory (mu_ held). True when fences
  // were left on their rings for want of room: the caller sees that they are collected later.
  bool collect_some_locked(std::vector<Done> *done);
  void signal_poll_fd();

  const bool async_;
  Callback cb_;
  UniqueFd event_fd_;

  mutable std::mutex mu_;
  std::deque<Pending> rings_[RVGL_RING_COUNT];
  // Per ring, out of memory: the fence behind the deque's last, standing for every fence added
  // since the deque could not grow. Room the delivery has from its creation, so add() never
  // allocates to keep a fence.
  Pending spilled_[RVGL_RING_COUNT] = {};
  uint64_t spilled_rings_ = 0;  // bit per ring whose spilled_ holds a fence
  uint64_t busy_rings_ = 0;     // bit per ring with pending fences
  uint64_t added_[RVGL_RING_COUNT] = {};
  uint64_t taken_[RVGL_RING_COUNT] = {};
  uint64_t waiting_ = 0;  // sum of added_ - taken_
  // Poll mode: waiting for poll(), and the batch poll() delivers (swapped, so both keep their
  // capacity: a poll allocates nothing once the context has run).
  std::vector<Done> ready_;
  std::vector<Done> polled_;
  uint64_t retired_ = 0;
  // Written under mu_; atomic so that a deliverer can see a stop() it waited out on deliver_mu_.
  std::atomic<bool> stopped_{false};
  bool delivering_ = false;  // async: a thread is in progress()'s delivery loop
  // Async: progress() found the delivery running during the deliverer's callbacks, or a collect
  // of the deliverer's left fences on their rings (out of memory).
  bool more_ = false;
  // Pending fences; written under mu_, read without it by first_pending_point().
  std::atomic<uint64_t> pending_{0};
  // Async: the deliverer's batch: touched under mu_ while delivering_ is clear (the collect that
  // claims the delivery), and then only by the thread that set delivering_, until it clears it;
  // kept so a delivery allocates nothing once the context has run.
  std::vector<Done> batch_;

  std::mutex deliver_mu_;
};

}  // namespace rvgl
