#include "spm/spm_reaper.h"

#include <algorithm>

namespace rvgl {

SpmReaper &SpmReaper::instance() {
  // Never destroyed: a context destroyed by another static destructor may still retire a session
  // after the drain below ran. Reachable through this pointer, so not a leak.
  static SpmReaper *r = new SpmReaper;
  // At exit (or when the library is unloaded) the sessions still being finished are waited for
  // and their threads joined: none is left running code of ours.
  static struct DrainAtExit {
    ~DrainAtExit() { r->drain(); }
  } drain_at_exit;
  return *r;
}

void SpmReaper::finish(Work &w) {
  w.session.reset();
  if (w.then) w.then();
  w.then = nullptr;  // its captures go before the work counts as done
  std::lock_guard lk(mu_);
  w.done = true;
  idle_.notify_all();
}

void SpmReaper::reap() {
  std::list<Work> finished;
  {
    std::lock_guard lk(mu_);
    for (auto it = work_.begin(); it != work_.end();) {
      auto next = std::next(it);
      if (it->done) finished.splice(finished.end(), work_, it);
      it = next;
    }
  }
  for (Work &w : finished)
    if (w.thread.joinable()) w.thread.join();  // already past finish(): returns at once
}

void SpmReaper::retire(std::unique_ptr<SpmSession> session, std::function<void()> then) {
  reap();
  Work *w = nullptr;
  try {
    std::lock_guard lk(mu_);
    w = &work_.emplace_back();
    w->session = std::move(session);
    w->then = std::move(then);
    // Started under mu_, so the thread's finish() cannot mark it done before `thread` is set.
    w->thread = std::thread([this, w] { finish(*w); });
    return;
  } catch (...) {
    // No thread (std::system_error, or no memory for its state or the list node): finish here.
  }
  if (!w) {
    // Not even the node: the session and `then` are still the caller's arguments.
    session.reset();
    if (then) then();
    return;
  }
  finish(*w);
  reap();
}

size_t SpmReaper::retired() const {
  std::lock_guard lk(mu_);
  return work_.size();
}

void SpmReaper::drain() {
  {
    std::unique_lock lk(mu_);
    idle_.wait(lk, [this] {
      return std::all_of(work_.begin(), work_.end(), [](const Work &w) { return w.done; });
    });
  }
  reap();
}

}  // namespace rvgl
