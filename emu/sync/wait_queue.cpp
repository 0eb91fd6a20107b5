#include "sync/wait_queue.h"

#include <algorithm>
#include <atomic>

namespace rvgl::emu {

namespace {

std::atomic<uint64_t> g_generation{0};

// Wake-ups queued by this thread while it holds the domain lock.
thread_local std::vector<std::shared_ptr<WakeToken>> t_pending;

}  // namespace

void DomainMutex::unlock() {
  if (t_pending.empty()) {
    pthread_mutex_unlock(&m_);
    return;
  }
  std::vector<std::shared_ptr<WakeToken>> wake;
  wake.swap(t_pending);
  pthread_mutex_unlock(&m_);
  for (const auto &t : wake)
    t->wake();
}

void WakeToken::wake() {
  {
    std::lock_guard lk(m_);
    woken_ = true;
  }
  cv_.notify_one();
}

bool WakeToken::sleep(Deadline d) {
  std::unique_lock lk(m_);
  bool woken;
  if (d == never()) {
    cv_.wait(lk, [this] { return woken_; });
    woken = true;
  } else {
    woken = cv_.wait_until(lk, d, [this] { return woken_; });
  }
  woken_ = false;
  return woken;
}

DomainMutex &FenceDomain::mutex() {
  static DomainMutex *m = new DomainMutex;  // never destroyed: workers may run during exit()
  return *m;
}

void FenceDomain::after_fork_child() {
  g_generation.fetch_add(1, std::memory_order_relaxed);
  t_pending.clear();
  // A parent's thread may have held this token's mutex (waking it) when the process forked.
  if (!Waiter::t_cache_gone_) Waiter::t_cache_.token.reset();
}

uint64_t FenceDomain::generation() {
  return g_generation.load(std::memory_order_relaxed);
}

void WaitQueue::wake_all_locked() {
  const uint64_t gen = FenceDomain::generation();
  std::erase_if(entries_, [gen](const Entry &e) { return e.generation != gen; });
  for (const Entry &e : entries_)
    t_pending.push_back(e.waiter->token());
}

thread_local Waiter::ThreadCache Waiter::t_cache_;
thread_local bool Waiter::t_cache_gone_ = false;

Waiter::Waiter() {
  // A second wait of one thread is not expected (a thread waits once at a time), but costs only a
  // token of its own.
  if (t_cache_gone_ || t_cache_.busy) {
    token_ = std::make_shared<WakeToken>();
    return;
  }
  ThreadCache &c = t_cache_;
  if (!c.token) c.token = std::make_shared<WakeToken>();
  c.busy = true;
  cached_ = true;
  token_ = c.token;
  subs_.swap(c.subs);
}

Waiter::~Waiter() {
  unsubscribe_all_locked();
  if (!cached_) return;
  ThreadCache &c = t_cache_;
  c.subs.swap(subs_);  // empty, with its capacity
  c.busy = false;
}

void Waiter::subscribe_locked(WaitQueue &q, std::shared_ptr<const void> keep) {
  const uint64_t gen = FenceDomain::generation();
  q.entries_.push_back({this, gen});
  subs_.push_back({&q, gen, std::move(keep)});
}

void Waiter::unsubscribe_all_locked() {
  for (const Sub &s : subs_) {
    auto &v = s.queue->entries_;
    auto it = std::find_if(v.begin(), v.end(), [&](const WaitQueue::Entry &e) {
      return e.waiter == this && e.generation == s.generation;
    });
    if (it != v.end()) v.erase(it);
  }
  subs_.clear();  // drops the keep-alive references last
}

}  // namespace rvgl::emu
