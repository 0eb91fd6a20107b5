// A user-mode queue (Linux 6.16+ DRM_AMDGPU_USERQ): the guest writes packets to its own ring and
// rings the doorbell; the host only creates and frees the kernel object, and asks the kernel what
// became of it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "amdgpu/amdgpu_device.h"
#include "memory/memory_object.h"
#include "queue/queue_status.h"
#include "rocm_virgl_protocol.h"

namespace rvgl {

class UserQueue {
 public:
  // req has passed check_user_queue(); doorbell is its DOORBELL object (kept alive by the queue).
  static int create(std::shared_ptr<AmdgpuDevice> dev, const rvgl_req_queue_create &req,
                    std::shared_ptr<MemoryObject> doorbell, std::unique_ptr<UserQueue> *out);
  ~UserQueue();
  uint32_t ip() const { return ip_; }
  const MemoryObject *doorbell() const { return doorbell_.get(); }
  uint32_t doorbell_offset() const { return doorbell_offset_; }

  // What the kernel says about this queue now (any thread), shaped like KernelQueue's.
  struct Observation {
    uint32_t queue_flags = 0;  // RVGL_AMDGPU_USERQ_QUERY_STATUS_FLAGS_* (HUNG, VRAMLOST)
    // 0, or why the kernel could not answer: -EINVAL from a kernel without
    // RVGL_AMDGPU_USERQ_OP_QUERY_STATUS (flags then say nothing), -ENODEV once the device is gone.
    int error = 0;
  };
  Observation observe() const;

  // Published by the context's QueueHealth (the one classifier); a condition once seen stays (the
  // kernel may remap a hung queue after a reset; the guest's ring state is gone all the same).
  using Status = QueueStatus;
  Status status() const { return status_.get(); }
  void publish(const Status &s) { status_.publish(s); }
  // Fills state/flags/error of a QUEUE_STATE response from what was published. The seqs stay 0:
  // the host is not on the ring's path (any thread).
  void fill_state(rvgl_rsp_queue_state *rsp) const;

 private:
  UserQueue(std::shared_ptr<AmdgpuDevice> dev, uint32_t ip, uint32_t id,
            std::shared_ptr<MemoryObject> doorbell, uint32_t doorbell_offset)
      : dev_(std::move(dev)),
        ip_(ip),
        queue_id_(id),
        doorbell_(std::move(doorbell)),
        doorbell_offset_(doorbell_offset) {}
  std::shared_ptr<AmdgpuDevice> dev_;
  uint32_t ip_;
  uint32_t queue_id_;
  std::shared_ptr<MemoryObject> doorbell_;
  uint32_t doorbell_offset_;
  PublishedStatus status_;
};

}  // namespace rvgl
