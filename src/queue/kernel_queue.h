// A kernel-scheduled queue: one amdgpu context submitting to one hardware IP. Submission n
// signals point n of the queue's timeline, which is both the guest-visible seq and what ring
// fences and other queues' waits refer to.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <utility>
#include <memory>
#include <span>

#include "amdgpu/amdgpu_device.h"
#include "queue/sync_timeline.h"
#include "rocm_virgl_protocol.h"

namespace rvgl {

struct TimelinePoint {
  uint32_t syncobj;
  uint64_t point;
};

class KernelQueue {
 public:
  // ip: RVGL_IP_*; priority: RVGL_PRIORITY_*.
  static int create(std::shared_ptr<AmdgpuDevice> dev, uint32_t ip, uint32_t priority,
                    std::unique_ptr<KernelQueue> *out);
  ~KernelQueue();

  // One CS ioctl: the IBs, waits on other timelines, the resident BO list, and the signal of the
  // next timeline point. On success *seq is that point.
  int submit(std::span<const rvgl_ib> ibs, std::span<const TimelinePoint> waits,
             std::span<const drm_amdgpu_bo_list_entry> bos, uint64_t *seq);

  const std::shared_ptr<SyncTimeline> &timeline() const { return timeline_; }
  uint64_t last_submitted() const { return last_seq_.load(std::memory_order_acquire); }
  uint64_t last_completed() const { return timeline_->value(); }
  uint32_t ip() const { return ip_; }

  // What the kernel says about this queue now (any thread).
  struct Observation {
    uint64_t ctx_flags = 0;  // AMDGPU_CTX_QUERY2_FLAGS_*
    int job_error = 0;       // error of the last submission, if it failed
  };
  Observation observe() const;

  // Records flags (RVGL_QUEUE_FLAG_*) and whether the queue is lost; returns the flags seen for
  // the first time, so each condition is reported once (any thread).
  uint32_t merge(uint32_t flags, bool lost, int error);

  // The first recent submission whose job failed, 0 if none is known (any thread).
  uint64_t first_failed_seq() const;

  // Fills state/flags/error/seqs of a QUEUE_STATE response (any thread).
  void fill_state(rvgl_rsp_queue_state *rsp) const;
  bool lost() const;

 private:
  KernelQueue(std::shared_ptr<AmdgpuDevice> dev, uint32_t ip) : dev_(std::move(dev)), ip_(ip) {}
  uint32_t hw_ip() const;

  std::shared_ptr<AmdgpuDevice> dev_;
  uint32_t ip_;
  uint32_t ctx_id_ = 0;
  bool has_ctx_ = false;
  std::shared_ptr<SyncTimeline> timeline_;
  std::atomic<uint64_t> last_seq_{0};     // written by the VMM thread only
  std::atomic<uint64_t> last_handle_{0};  // kernel fence of the last submission
  mutable std::mutex mu_;                 // health, shared with the retire thread
  bool lost_ = false;
  int first_error_ = 0;
  uint32_t flags_ = 0;
  // Kernel fences of recent submissions, to tell which one failed.
  static constexpr size_t kRecent = 256;
  std::deque<std::pair<uint64_t, uint64_t>> recent_;  // (seq, kernel handle)
};

}  // namespace rvgl
