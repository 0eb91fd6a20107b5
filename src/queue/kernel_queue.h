// A kernel-scheduled queue: one amdgpu context submitting to one hardware IP. Submission n
// signals point n of the queue's timeline, which is both the guest-visible seq and what ring
// fences and other queues' waits refer to.
#pragma once

#include <cstdint>
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
  uint64_t last_submitted() const { return last_seq_; }
  uint64_t last_completed() const { return timeline_->value(); }
  uint32_t ip() const { return ip_; }

  // Fills state/flags/error of a QUEUE_STATE response from the kernel's view of the context.
  void query_state(rvgl_rsp_queue_state *rsp);
  bool lost() const { return lost_; }
  void mark_lost(int error) {
    if (!lost_) first_error_ = error;
    lost_ = true;
  }

 private:
  KernelQueue(std::shared_ptr<AmdgpuDevice> dev, uint32_t ip) : dev_(std::move(dev)), ip_(ip) {}
  uint32_t hw_ip() const;

  std::shared_ptr<AmdgpuDevice> dev_;
  uint32_t ip_;
  uint32_t ctx_id_ = 0;
  bool has_ctx_ = false;
  std::shared_ptr<SyncTimeline> timeline_;
  uint64_t last_seq_ = 0;
  uint64_t last_handle_ = 0;  // kernel fence of the last submission
  bool lost_ = false;
  int first_error_ = 0;
};

}  // namespace rvgl
