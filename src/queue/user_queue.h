// A user-mode queue (Linux 6.16+ DRM_AMDGPU_USERQ): the guest writes packets to its own ring and
// rings the doorbell; the host only creates and frees the kernel object.
#pragma once

#include <cstdint>
#include <memory>

#include "amdgpu/amdgpu_device.h"
#include "rocm_virgl_protocol.h"

namespace rvgl {

class UserQueue {
 public:
  // doorbell_handle: GEM handle of the DOORBELL object on dev.
  static int create(std::shared_ptr<AmdgpuDevice> dev, const rvgl_req_queue_create &req,
                    uint32_t doorbell_handle, std::unique_ptr<UserQueue> *out);
  ~UserQueue();
  uint32_t ip() const { return ip_; }

 private:
  UserQueue(std::shared_ptr<AmdgpuDevice> dev, uint32_t ip, uint32_t id)
      : dev_(std::move(dev)), ip_(ip), queue_id_(id) {}
  std::shared_ptr<AmdgpuDevice> dev_;
  uint32_t ip_;
  uint32_t queue_id_;
};

}  // namespace rvgl
