// Who sleeps on what. All fence and syncobj state shares one lock (FenceDomain::mutex()), but each
// sleeping thread has a wake-up token of its own and is registered on the wait queue of every
// object it waits for (fences, syncobjs, a ring's job queue), as the kernel's dma_fence callbacks
// and syncobj wait entries are: a change wakes only the threads waiting for that object, so idle
// waiters of other files are never woken (issue 16's cost model). Wake-ups are delivered when the
// lock is released, so a woken thread does not run into the lock its waker still holds.
#pragma once

#include <pthread.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "util/clock.h"

namespace rvgl::emu {

class Waiter;

// The domain lock: a mutex whose unlock() then delivers the wake-ups queued while it was held.
//
// It stands for the kernel's locks of the same state, which are spinlocks held for well under a
// microsecond: a syncobj's `lock` (include/drm/drm_syncobj.h), a fence's `lock`
// (include/linux/dma-fence.h), the scheduler's `job_list_lock` (include/drm/gpu_scheduler.h). A
// kernel thread that finds one taken spins; it is not put to sleep and woken again. So a
// contender here spins for a bounded while before it sleeps (glibc's adaptive mutex: at most
// `glibc.pthread.mutex_spin_count` tries, 100 by default), and a CS, a ring's fence signal and a
// SYNCOBJ_EVENTFD registration that meet on the lock cost about the hold time, not two context
// switches (docs/performance.md, "The emulator's own cost").
class DomainMutex {
 public:
  void lock() { pthread_mutex_lock(&m_); }
  bool try_lock() { return pthread_mutex_trylock(&m_) == 0; }
  void unlock();

 private:
  pthread_mutex_t m_ = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
};

// What a waker signals; shared, so a wake-up delivered after the lock is released still has an
// object to reach when the waiter has already returned. Its own small mutex is never held while
// the domain lock is wanted, and the notify happens after it is released, so a woken thread
// runs straight on.
class WakeToken {
 public:
  void wake();
  // Sleeps until woken or the deadline; false on timeout. Consumes the wake-up.
  bool sleep(Deadline d);

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool woken_ = false;
};

// The waiters of one object. Every member: FenceDomain::mutex() held.
class WaitQueue {
 public:
  struct Entry {
    Waiter *waiter;
    uint64_t generation;  // fork generation: a forked child drops its parent's sleepers
  };
  WaitQueue() = default;
  WaitQueue(const WaitQueue &) = delete;
  WaitQueue &operator=(const WaitQueue &) = delete;
  // Wakes every registered waiter when the lock is next released (each unregisters itself when it
  // runs again).
  void wake_all_locked();
  size_t size_locked() const { return entries_.size(); }

 private:
  friend class Waiter;
  std::vector<Entry> entries_;
};

// One sleeping thread (on its stack for one wait). FenceDomain::mutex() held for every member.
// A wait takes its thread's token and subscription list, kept from the last wait (a thread sleeps
// in one wait at a time), so a wait allocates nothing once its thread has waited before; a wake-up
// meant for an earlier wait that arrives late only makes the next one look again.
class Waiter {
 public:
  Waiter();
  ~Waiter();
  Waiter(const Waiter &) = delete;
  Waiter &operator=(const Waiter &) = delete;

  // Registers on `q` until the next wake-up; `keep` holds q's owner alive meanwhile (an object
  // may lose its last other reference while this thread sleeps on it).
  void subscribe_locked(WaitQueue &q, std::shared_ptr<const void> keep);
  void unsubscribe_all_locked();
  const std::shared_ptr<WakeToken> &token() const { return token_; }

 private:
  struct Sub {
    WaitQueue *queue;
    uint64_t generation;
    std::shared_ptr<const void> keep;
  };
  // What a thread's waits reuse; `busy` while a Waiter of the thread holds them.
  struct ThreadCache {
    std::shared_ptr<WakeToken> token;
    std::vector<Sub> subs;
    bool busy = false;
    ~ThreadCache() { t_cache_gone_ = true; }
  };
  static thread_local ThreadCache t_cache_;
  // Set once the thread's cache is destroyed (thread exit, or exit() for the main thread): a wait
  // after that, from a later destructor, takes a token of its own. Trivially destructible, so it
  // outlives the cache.
  static thread_local bool t_cache_gone_;
  friend class FenceDomain;  // after_fork_child() drops the forking thread's cache

  std::shared_ptr<WakeToken> token_;
  std::vector<Sub> subs_;
  bool cached_ = false;  // token_ and subs_ came from t_cache_
};

class FenceDomain {
 public:
  static DomainMutex &mutex();
  // In a forked child: the parent's sleepers do not exist there (their stacks may be reused).
  static void after_fork_child();
  static uint64_t generation();

  // Waits (the lock held by `lk`) until pred() or the deadline; returns pred(). Before each sleep
  // `subscribe(waiter)` registers the waiter on the queues of everything pred() looks at.
  template <typename Pred, typename Subscribe>
  static bool wait_until(std::unique_lock<DomainMutex> &lk, Deadline d, Pred pred,
                         Subscribe subscribe) {
    if (pred()) return true;
    Waiter w;
    for (;;) {
      subscribe(w);
      lk.unlock();  // delivers the wake-ups this thread queued
      const bool woken = w.token()->sleep(d);
      lk.lock();
      w.unsubscribe_all_locked();
      if (pred()) return true;
      if (!woken) return false;
    }
  }
};

}  // namespace rvgl::emu
