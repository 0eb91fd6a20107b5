// UserQueue::observe(): what the (emulated) kernel says about a user queue, read through
// RVGL_AMDGPU_USERQ_OP_QUERY_STATUS, before and after the queue faults.
#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "../tools/common/amd_packets.h"
#include "amdgpu/amdgpu_device.h"
#include "queue/user_queue.h"
#include "support/device_bo.h"

using namespace rvgl;
namespace pk = rvgl::packets;

using Bo = rvgl::test::DeviceBo;

TEST_CASE("UserQueue::observe reports what QUERY_STATUS says", "[queue][userq]") {
  int err = 0;
  auto dev = AmdgpuDevice::open("/dev/dri/renderD128", &err);
  REQUIRE(dev);
  rvgl_drm_amdgpu_info_device info{};
  REQUIRE(dev->query_dev_info(&info) == 0);
  if (!(info.userq_ip_mask & (1u << AMDGPU_HW_IP_COMPUTE))) return;  // gfx942: no user queues

  const uint64_t va = 1ull << 30;
  Bo ring(*dev, 64 * 1024, AMDGPU_GEM_DOMAIN_GTT, va);
  Bo rptr(*dev, 4096, AMDGPU_GEM_DOMAIN_GTT, va + (1 << 20));
  Bo wptr(*dev, 4096, AMDGPU_GEM_DOMAIN_GTT, va + (2 << 20));
  Bo eop(*dev, 4096, AMDGPU_GEM_DOMAIN_GTT, va + (3 << 20));
  Bo bell(*dev, 4096, RVGL_AMDGPU_GEM_DOMAIN_DOORBELL, 0);
  auto doorbell = std::make_shared<MemoryObject>(
      dev, MemoryObject::Kind::kBo, RVGL_DOMAIN_DOORBELL,
      std::vector<MemoryObject::Segment>{{bell.handle, 4096, nullptr}}, false);

  rvgl_req_queue_create req{};
  req.kind = RVGL_QUEUE_KIND_USER;
  req.ip = RVGL_IP_COMPUTE;
  req.queue_va = va;
  req.queue_size = ring.size;
  req.rptr_va = va + (1 << 20);
  req.wptr_va = va + (2 << 20);
  req.eop_va = va + (3 << 20);
  req.doorbell_offset = 2;
  std::unique_ptr<UserQueue> q;
  REQUIRE(UserQueue::create(dev, req, doorbell, &q) == 0);
  CHECK(q->doorbell() == doorbell.get());
  CHECK(q->doorbell_offset() == 2);

  auto o = q->observe();
  CHECK(o.error == 0);
  CHECK(o.queue_flags == 0);

  std::vector<uint32_t> pkt;
  pk::pm4_write_data(pkt, 1ull << 40, {1});  // unmapped
  std::memcpy(ring.cpu, pkt.data(), pkt.size() * 4);
  *wptr.ptr<uint64_t>() = pkt.size();
  __atomic_store_n(bell.ptr<uint64_t>() + 2, pkt.size(), __ATOMIC_RELEASE);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((o = q->observe()).queue_flags == 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  CHECK(o.error == 0);
  CHECK(o.queue_flags == RVGL_AMDGPU_USERQ_QUERY_STATUS_FLAGS_HUNG);

  // QUEUE_STATE reports only what the health owner published (QueueHealth classifies).
  rvgl_rsp_queue_state st{};
  q->fill_state(&st);
  CHECK(st.state == RVGL_QUEUE_STATE_OK);
  q->publish({true, -ETIME, RVGL_QUEUE_FLAG_HANG});
  q->fill_state(&st);
  CHECK(st.state == RVGL_QUEUE_STATE_LOST);
  CHECK(st.flags == RVGL_QUEUE_FLAG_HANG);
  CHECK(st.error == -ETIME);

  // After the queue is gone the kernel knows no such id: observe() says it cannot tell.
  rvgl_drm_amdgpu_userq gone{};
  gone.in.op = RVGL_AMDGPU_USERQ_OP_QUERY_STATUS;
  gone.in.queue_id = 77;
  CHECK(dev->ioctl(RVGL_DRM_IOCTL_AMDGPU_USERQ, &gone) == -EINVAL);
}
