// Finishes released SPM sessions off the VMM's thread. Releasing the kernel's SPM waits for a
// SET_DEST in progress (up to the guest's timeout); neither SPM_RELEASE nor context destroy may
// block the VMM that long, so the wait happens here and `then` runs once the SPM is free.
//
// One thread per session being finished, joined: by the next retire() once it is done, or by
// drain(). A detached thread would still run code of ours (destroying its closure, `then`'s
// captures) after drain() saw its session finished, so drain() at exit or unload could not say
// that nothing of ours runs any more.
#pragma once

#include <condition_variable>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "spm/spm_session.h"

namespace rvgl {

class SpmReaper {
 public:
  static SpmReaper &instance();

  // When no thread can be started, the session is finished on the caller's thread instead (the
  // wait the reaper exists to spare the VMM, but no SPM held for ever by a session nobody ends).
  void retire(std::unique_ptr<SpmSession> session, std::function<void()> then);
  // Waits until every retired session is gone, its `then` has run and been destroyed, and its
  // thread has exited (tests, and the library's exit).
  void drain();
  // Retired sessions not yet joined, finished or not (tests).
  size_t retired() const;

 private:
  // One retired session: what is left of it, and the thread finishing it.
  struct Work {
    std::unique_ptr<SpmSession> session;  // the finishing thread's until `done`
    std::function<void()> then;           // likewise
    std::thread thread;                   // mu_; not joinable when finished in place
    bool done = false;                    // mu_
  };

  SpmReaper() = default;
  void finish(Work &w);
  // Joins the threads of finished work, outside mu_.
  void reap();

  mutable std::mutex mu_;
  std::condition_variable idle_;
  std::list<Work> work_;  // mu_; list nodes stay put while their thread uses them
};

}  // namespace rvgl
