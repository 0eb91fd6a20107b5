// A dma_fence: signals once, optionally with an error. All fence and syncobj state shares one lock
// and one condition variable (FenceDomain), so a waiter can sleep on any mix of fences, syncobj
// points and "a point was submitted" without per-object plumbing, and fork() can quiesce it all.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "util/clock.h"

namespace rvgl::emu {

class FenceDomain {
 public:
  static std::mutex &mutex();
  static std::condition_variable &cv();
  // Waits (the lock held by `lk`) until pred() or the deadline; returns pred().
  template <typename Pred>
  static bool wait_until(std::unique_lock<std::mutex> &lk, Deadline d, Pred pred) {
    if (d == never()) {
      cv().wait(lk, pred);
      return true;
    }
    return cv().wait_until(lk, d, pred);
  }
  // Wakes every waiter (after a change made under the lock).
  static void notify() { cv().notify_all(); }
};

class Fence {
 public:
  static std::shared_ptr<Fence> create();
  static std::shared_ptr<Fence> signaled(int error = 0);
  // Signals once all of `fences` have; carries the first error among them.
  static std::shared_ptr<Fence> all_of(const std::vector<std::shared_ptr<Fence>> &fences);

  // Idempotent: the first call decides the error.
  void signal(int error = 0);
  bool is_signaled() const;
  bool is_signaled_locked() const { return signaled_; }
  int error_locked() const { return error_; }
  int error() const;
  // Runs cb once the fence signals (immediately, on this thread, if it already has). Callbacks run
  // without the domain lock held.
  void on_signal(std::function<void()> cb);
  // The same for a fence not yet signaled, with the domain lock held (cb runs later, unlocked).
  void on_signal_locked(std::function<void()> cb) { callbacks_.push_back(std::move(cb)); }
  // True when signaled before the deadline.
  bool wait(Deadline d) const;

 private:
  bool signaled_ = false;
  int error_ = 0;
  std::vector<std::function<void()>> callbacks_;
};

}  // namespace rvgl::emu
