// What SPM sessions report to the context that started them: a SET_DEST's response, then its ring
// point, then a look for fences that point made ready. Shared by the context and every session
// it started, a released one included: that one finishes its SET_DESTs on the reaper while the
// context serves on, and their responses and the SPM ring's fences must still reach the guest.
// The context cuts the link when it goes; nothing is called after cut() returns.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>

#include "queue/sync_timeline.h"
#include "rocm_virgl_protocol.h"

namespace rvgl {

class SpmCallbacks {
 public:
  // rsp_off is RVGL_RSP_NONE when the guest asked for no response.
  using Completion =
      std::function<void(uint32_t xcp, uint32_t rsp_off, const rvgl_rsp_spm_set_dest &rsp)>;
  using Signal = std::function<void()>;

  SpmCallbacks(Completion done, Signal signalled)
      : done_(std::move(done)), signalled_(std::move(signalled)) {}

  // A session's worker: one SET_DEST finished. Under one lock, so that a cut() meanwhile leaves
  // no report half made and nothing of the old owner running once it returns. The point is
  // signalled whether or not anyone still listens.
  void finished(uint32_t xcp, uint32_t rsp_off, const rvgl_rsp_spm_set_dest &rsp,
                SyncTimeline &timeline, uint64_t point) {
    std::lock_guard lk(mu_);
    if (done_) done_(xcp, rsp_off, rsp);
    timeline.signal(point);
    if (signalled_) signalled_();
  }

  // The owner is going: waits out a report in progress (never a kernel call).
  void cut() {
    std::lock_guard lk(mu_);
    done_ = nullptr;
    signalled_ = nullptr;
  }

 private:
  std::mutex mu_;
  Completion done_;
  Signal signalled_;
};

}  // namespace rvgl
