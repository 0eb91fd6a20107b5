// UserQueue::observe(): what the (emulated) kernel says about a user queue, read through
// RVGL_AMDGPU_USERQ_OP_QUERY_STATUS, before and after the queue faults.
#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <thread>

#include "../tools/common/amd_packets.h"
#include "amdgpu/amdgpu_device.h"
#include "queue/user_queue.h"
#include "support/device_user_queue.h"

using namespace rvgl;
namespace pk = rvgl::packets;

TEST_CASE("UserQueue::observe reports what QUERY_STATUS says", "[queue][userq]") {
  int err = 0;
  auto dev = AmdgpuDevice::open("/dev/dri/renderD128", &err);
  REQUIRE(dev);
  if (!test::DeviceUserQueue::supported(*dev)) return;  // gfx942: no user queues

  test::DeviceUserQueue uq(dev, 1ull << 30);
  const std::shared_ptr<UserQueue> &q = uq.q;
  CHECK(q->doorbell() == uq.doorbell.get());
  CHECK(q->doorbell_offset() == test::DeviceUserQueue::kDoorbellSlot);

  auto o = q->observe();
  CHECK(o.error == 0);
  CHECK(o.queue_flags == 0);

  std::vector<uint32_t> pkt;
  pk::pm4_write_data(pkt, 1ull << 40, {1});  // unmapped
  uq.run(pkt);
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
