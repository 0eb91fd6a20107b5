// Finishes released SPM sessions off the VMM's thread. Releasing the kernel's SPM waits for a
// SET_DEST in progress (up to the guest's timeout); neither SPM_RELEASE nor context destroy may
// block the VMM that long, so the wait happens here and `then` runs once the SPM is free.
#pragma once

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
  ~SpmReaper();  // joins what is still running (process exit)

  void retire(std::unique_ptr<SpmSession> session, std::function<void()> then);
  // Waits until every retired session is gone (tests).
  void drain();

 private:
  struct Job {
    std::thread thread;
    bool done = false;
  };
  void reap_finished_locked();

  std::mutex mu_;
  std::list<Job> jobs_;
};

}  // namespace rvgl
