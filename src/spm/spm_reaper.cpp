#include "spm/spm_reaper.h"

#include <thread>

namespace rvgl {

SpmReaper &SpmReaper::instance() {
  // Never destroyed: a detached thread still returns through it after drain() saw it finish.
  // Reachable through this pointer, so not a leak.
  static SpmReaper *r = new SpmReaper;
  // At exit (or when the library is unloaded) the sessions still being finished are waited for,
  // as joining them did: none is left running code of ours past its `then`.
  static struct DrainAtExit {
    ~DrainAtExit() { r->drain(); }
  } drain_at_exit;
  return *r;
}

void SpmReaper::finished() {
  // Notified under the lock: drain() returns only after this thread released it, and touches
  // nothing of ours after that.
  std::lock_guard lk(mu_);
  if (--running_ == 0) idle_.notify_all();
}

void SpmReaper::retire(std::unique_ptr<SpmSession> session, std::function<void()> then) {
  {
    std::lock_guard lk(mu_);
    ++running_;
  }
  SpmSession *raw = session.get();
  try {
    std::thread([this, raw, then] {
      delete raw;
      if (then) then();
      finished();
    }).detach();
    session.release();  // the thread owns it now
  } catch (...) {
    // No thread (std::system_error, or no memory for its state): finish here.
    session.reset();
    if (then) then();
    finished();
  }
}

void SpmReaper::drain() {
  std::unique_lock lk(mu_);
  idle_.wait(lk, [this] { return running_ == 0; });
}

}  // namespace rvgl
