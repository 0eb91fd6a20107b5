// The completion engine's watch on one kernel queue's timeline: it moves the timeline's known
// point when the GPU reaches it, tells the health owner, and lets fence delivery retire what
// waited for it.
//
// Arm point (why no kick is needed per fence or per submission): with work in flight, the point
// of the oldest fence still waiting on the queue, or the newest submitted point when none waits
// (one wakeup covers a burst nobody waits for); with nothing in flight, the next point, which
// the wait's WAIT_FOR_SUBMIT lets the thread wait for before it is submitted. A fence created
// later for work already submitted waits for a point at or after the armed one, so it is seen
// when that point (or the one armed after it) is reached. A fence is never held for work
// submitted after it, mergeable or not: the guest may make that later work wait for something
// it does once the fence has signalled.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "queue/completion_engine.h"
#include "queue/fence_delivery.h"
#include "queue/kernel_queue.h"
#include "queue/queue_health.h"

namespace rvgl {

class QueueWatch final : public CompletionEngine::Watch {
 public:
  QueueWatch(std::shared_ptr<KernelQueue> q, uint32_t handle, FenceDelivery &delivery,
             QueueHealth &health)
      : queue_(std::move(q)), handle_(handle), delivery_(delivery), health_(health) {}

  uint64_t arm_point() override;
  void reached(uint64_t point) override;
  // On the VMM's thread, which learnt of the completion first (poll mode: the kernel woke it in
  // place of the engine; create_fence: the user fence shows the job done): the queue reached
  // `point`, of which it knows `known`. True when the health owner may look after the point is
  // known (the completion is marked for it) and the point is now known; false when the engine
  // must classify first (QueueHealth::completed_later).
  bool reached_here(uint64_t point, int64_t now_ns, QueueHealth::Known known);
  int direct_wake_fd() override { return delivery_.direct_wake_fd(); }
  // The user fence page: a job that ran to its end (a failed one is left to the timeline).
  uint64_t signalled_from(uint64_t point) override { return queue_->finished_from(point); }
  // Made known as reached_here() does, the job having run to its end; the health owner's look
  // then waits for the kernel's signal: one now could read the VM's fault cache before the kernel
  // recorded a fault of that very job, which the kernel does before it signals the job's fence,
  // not before the GPU writes the user fence.
  bool reached_early(uint64_t point) override;

  // The queue was destroyed: its health is never looked at again; the watch stays only while
  // fences wait for its timeline.
  void retire() { retired_.store(true, std::memory_order_release); }
  bool retired() const { return retired_.load(std::memory_order_acquire); }
  const KernelQueue &queue() const { return *queue_; }

 private:
  std::shared_ptr<KernelQueue> queue_;
  uint32_t handle_;
  FenceDelivery &delivery_;
  QueueHealth &health_;
  std::atomic<bool> retired_{false};
};

}  // namespace rvgl
