// A dma_fence: signals once, optionally with an error. All fence and syncobj state shares one lock
// (FenceDomain::mutex(), sync/wait_queue.h); a thread waiting for a fence sleeps on the fence's own
// wait queue, so a signal wakes only its waiters.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "sync/wait_queue.h"
#include "util/clock.h"

namespace rvgl::emu {

// What a fence runs once when it signals, as a dma_fence_cb is: a node the fence owns from
// on_signal until it has run (then deletes it) or the fence is destroyed unsignaled (deleted
// without running). One allocation per wait, made by whoever waits, where a std::function with
// captures cost a functor, a counter and the fence's list storage, freed on the signalling
// thread.
class FenceCallback {
 public:
  virtual ~FenceCallback() = default;
  // Runs on the thread that signalled the fence, without the domain lock.
  virtual void signaled() = 0;

 private:
  friend class Fence;
  FenceCallback *next_ = nullptr;
};

class Fence {
 public:
  Fence() = default;
  ~Fence();
  Fence(const Fence &) = delete;
  Fence &operator=(const Fence &) = delete;

  static std::shared_ptr<Fence> create();
  // A fence of timeline `context` (dma_fence.context): fences of one context signal in order, so
  // a newer one stands for every older one (dma_resv_add_fence() keeps one per context).
  static std::shared_ptr<Fence> create(uint64_t context);
  // A new timeline id, never 0 (dma_fence_context_alloc()).
  static uint64_t new_context();
  uint64_t context() const { return context_; }
  static std::shared_ptr<Fence> signaled(int error = 0);
  // Signals once all of `fences` have; carries the first error among them.
  static std::shared_ptr<Fence> all_of(const std::vector<std::shared_ptr<Fence>> &fences);

  // Idempotent: the first call decides the error.
  void signal(int error = 0);
  bool is_signaled() const;
  bool is_signaled_locked() const { return signaled_.load(std::memory_order_relaxed); }
  int error_locked() const { return error_; }
  int error() const;
  // Runs cb once the fence signals (immediately, on this thread, if it already has). Callbacks run
  // without the domain lock held.
  void on_signal(std::function<void()> cb);
  // Takes `cb` for a fence not yet signaled, with the domain lock held (it runs later, unlocked,
  // in the order added).
  void on_signal_locked(std::unique_ptr<FenceCallback> cb);
  // True when signaled before the deadline.
  bool wait(Deadline d) const;
  // Registers `w` to be woken when `f` signals (nothing if it has). Domain lock held.
  static void subscribe_locked(Waiter &w, const std::shared_ptr<Fence> &f);

 private:
  // Runs (or only deletes) every node of a detached chain, in order.
  static void release_chain(FenceCallback *cb, bool run);

  uint64_t context_ = 0;  // 0: a fence of no timeline
  // Written under the domain lock, read without it by is_signaled(): dma_fence_is_signaled() tests
  // DMA_FENCE_FLAG_SIGNALED_BIT without the fence's lock (include/linux/dma-fence.h).
  std::atomic<bool> signaled_{false};
  int error_ = 0;
  // Callbacks in the order added (domain lock): owned, see FenceCallback.
  FenceCallback *first_cb_ = nullptr;
  FenceCallback *last_cb_ = nullptr;
  mutable WaitQueue waiters_;
};

}  // namespace rvgl::emu
