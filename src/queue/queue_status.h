// A queue's health as the context's QueueHealth (the one classifier) published it; QUEUE_STATE
// reads it on the VMM's thread. A condition once seen stays.
#pragma once

#include <cstdint>
#include <mutex>

#include "rocm_virgl_protocol.h"

namespace rvgl {

struct QueueStatus {
  bool lost = false;
  int error = 0;       // the first job error seen (negative errno)
  uint32_t flags = 0;  // RVGL_QUEUE_FLAG_*
};

class PublishedStatus {
 public:
  QueueStatus get() const {
    std::lock_guard lk(mu_);
    return status_;
  }
  void publish(const QueueStatus &s) {
    std::lock_guard lk(mu_);
    status_ = s;
  }
  // state/flags/error of a QUEUE_STATE response, and the seqs given.
  void fill(rvgl_rsp_queue_state *rsp, uint64_t submitted, uint64_t completed) const {
    const QueueStatus s = get();
    rsp->state = s.lost ? RVGL_QUEUE_STATE_LOST : RVGL_QUEUE_STATE_OK;
    rsp->flags = s.flags;
    rsp->error = s.error;
    rsp->last_submitted_seq = submitted;
    rsp->last_completed_seq = completed;
  }

 private:
  mutable std::mutex mu_;
  QueueStatus status_;
};

}  // namespace rvgl
