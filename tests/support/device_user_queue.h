// A compute user queue made straight on an AmdgpuDevice, for tests below the context (queues,
// health): its ring, rptr, wptr and EOP buffers bound at `va` and the MiB after it, and a
// doorbell page. The device must have compute user queues (not gfx942: check supported()).
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "amdgpu/amdgpu_device.h"
#include "queue/user_queue.h"
#include "support/device_bo.h"

namespace rvgl::test {

struct DeviceUserQueue {
  static constexpr uint32_t kDoorbellSlot = 2;

  DeviceBo ring, rptr, wptr, eop, bell;
  std::shared_ptr<MemoryObject> doorbell;
  std::shared_ptr<UserQueue> q;

  static bool supported(AmdgpuDevice &dev) {
    rvgl_drm_amdgpu_info_device info{};
    REQUIRE(dev.query_dev_info(&info) == 0);
    return info.userq_ip_mask & (1u << AMDGPU_HW_IP_COMPUTE);
  }

  DeviceUserQueue(const std::shared_ptr<AmdgpuDevice> &dev, uint64_t va)
      : ring(*dev, 64 * 1024, AMDGPU_GEM_DOMAIN_GTT, va),
        rptr(*dev, 4096, AMDGPU_GEM_DOMAIN_GTT, va + (1 << 20)),
        wptr(*dev, 4096, AMDGPU_GEM_DOMAIN_GTT, va + (2 << 20)),
        eop(*dev, 4096, AMDGPU_GEM_DOMAIN_GTT, va + (3 << 20)),
        bell(*dev, 4096, RVGL_AMDGPU_GEM_DOMAIN_DOORBELL, 0),
        doorbell(std::make_shared<MemoryObject>(
            dev, MemoryObject::Kind::kBo, RVGL_DOMAIN_DOORBELL,
            std::vector<MemoryObject::Segment>{{bell.handle, 4096, nullptr}}, false)) {
    rvgl_req_queue_create req{};
    req.kind = RVGL_QUEUE_KIND_USER;
    req.ip = RVGL_IP_COMPUTE;
    req.queue_va = va;
    req.queue_size = ring.size;
    req.rptr_va = va + (1 << 20);
    req.wptr_va = va + (2 << 20);
    req.eop_va = va + (3 << 20);
    req.doorbell_offset = kDoorbellSlot;
    std::unique_ptr<UserQueue> made;
    REQUIRE(UserQueue::create(dev, req, doorbell, &made) == 0);
    q = std::move(made);
  }

  // Writes `packets` at the start of the ring and rings the doorbell: the queue runs them.
  void run(const std::vector<uint32_t> &packets) {
    std::memcpy(ring.cpu, packets.data(), packets.size() * 4);
    *wptr.ptr<uint64_t>() = packets.size();
    __atomic_store_n(bell.ptr<uint64_t>() + kDoorbellSlot, packets.size(), __ATOMIC_RELEASE);
  }
};

}  // namespace rvgl::test
