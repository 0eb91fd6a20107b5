// Finishes released SPM sessions off the VMM's thread. Releasing the kernel's SPM waits for a
// SET_DEST in progress (up to the guest's timeout); neither SPM_RELEASE nor context destroy may
// block the VMM that long, so the wait happens here and `then` runs once the SPM is free.
//
// One thread per session being finished, detached and counted, so that a thread that is done is
// gone at once (a joinable one stayed, with its stack, until some later retire() joined it).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "spm/spm_session.h"

namespace rvgl {

class SpmReaper {
 public:
  static SpmReaper &instance();

  // When no thread can be started, the session is finished on the caller's thread instead (the
  // wait the reaper exists to spare the VMM, but no SPM held for ever by a session nobody ends).
  void retire(std::unique_ptr<SpmSession> session, std::function<void()> then);
  // Waits until every retired session is gone and its `then` has run (tests).
  void drain();

 private:
  SpmReaper() = default;
  void finished();

  std::mutex mu_;
  std::condition_variable idle_;
  uint32_t running_ = 0;  // mu_
};

}  // namespace rvgl
