// A kernel queue's user fence page (queue/user_fence.h): the GPU writes a job's sequence number
// there once the job ran to its end, so finished_point() tells without an ioctl which point is
// done; a job that failed never writes it, and a queue without the page still works.
#include <catch2/catch.hpp>

#include <cstring>
#include <stdexcept>
#include <string>

#include "../tools/common/amd_packets.h"
#include "amdgpu/amdgpu_device.h"
#include "amdgpu/render_node.h"
#include "queue/kernel_queue.h"
#include "rvgl_emu.h"
#include "support/device_bo.h"
#include "support/queue_wait.h"
#include "support/scoped_knob.h"

using namespace rvgl;
namespace pk = rvgl::packets;

namespace {

constexpr uint64_t kIbVa = 1ull << 32;
constexpr uint64_t kUnmappedVa = 3ull << 32;

// A device and two IBs in one object at kIbVa: a NOP, and a write to an unmapped address.
struct IbRig {
  std::shared_ptr<AmdgpuDevice> dev = open_device();
  test::DeviceBo ibs{*dev, 4096, AMDGPU_GEM_DOMAIN_GTT, kIbVa};
  rvgl_ib nop_ib{}, fault_ib{};
  IbRig() {
    std::vector<uint32_t> nop, fault;
    pk::pm4_nop(nop, 6);
    pk::pm4_write_data(fault, kUnmappedVa, {1});
    std::memcpy(ibs.cpu, nop.data(), nop.size() * 4);
    std::memcpy(ibs.ptr<uint8_t>() + 1024, fault.data(), fault.size() * 4);
    nop_ib = {kIbVa, static_cast<uint32_t>(nop.size() * 4), 0};
    fault_ib = {kIbVa + 1024, static_cast<uint32_t>(fault.size() * 4), 0};
  }
  ~IbRig() { dev->gem_close(ibs.handle); }

  static std::shared_ptr<AmdgpuDevice> open_device() {
    int err = 0;
    auto d = AmdgpuDevice::open(choose_render_node(""), &err);
    if (!d) throw std::runtime_error("no device: " + std::to_string(err));
    return d;
  }
};

}  // namespace

TEST_CASE("a kernel queue's user fence shows the jobs that ran to their end", "[user-fence]") {
  IbRig rig;
  const auto &dev = rig.dev;
  const rvgl_ib nop_ib = rig.nop_ib, fault_ib = rig.fault_ib;
  // The fault stops the job (amdgpu.vm_fault_stop=2): it fails and never reaches its fence.
  test::ScopedKnob stop("RVGL_EMU_VM_FAULT_STOP", "2");
  REQUIRE(stop.ok());

  std::unique_ptr<KernelQueue> q;
  REQUIRE(KernelQueue::create(dev, RVGL_IP_COMPUTE, RVGL_PRIORITY_NORMAL, &q) == 0);
  CHECK(q->finished_point() == 0);
  uint64_t seq = 0;
  for (int i = 0; i < 3; ++i)
    REQUIRE(q->submit({&nop_ib, 1}, {}, 0, &seq) == 0);
  test::wait_signalled(*q, 3);
  CHECK(q->finished_point() == 3);
  CHECK(q->finished(3));
  CHECK(q->finished(1));
  REQUIRE(q->submit({&fault_ib, 1}, {}, 0, &seq) == 0);
  test::wait_signalled(*q, 4);
  uint64_t job = 0;
  bool unread = false, shared = false;
  CHECK(q->job_error(4, &job, &unread, &shared) == -ETIME);  // the faulting job timed out
  CHECK_FALSE(unread);
  CHECK_FALSE(shared);  // a kernel before 6.5 (the emulator's default): each job's own
  CHECK(job == 4);
  CHECK(q->context_error() == 0);
  uint64_t failed = 0;
  CHECK(q->first_error_between(0, 4, &failed, &unread, &shared) == -ETIME);
  CHECK(failed == 4);
  CHECK_FALSE(shared);
  CHECK(q->finished_point() == 3);
  CHECK_FALSE(q->finished(4));  // the failed job never wrote the page
  CHECK(q->finished(3));

  SECTION("a queue whose page the kernel refused submits as before and knows nothing") {
    rvgl_emu_reset_fault_injection();
    REQUIRE(rvgl_emu_set_knob("RVGL_EMU_FAIL", "GEM_CREATE:1:ENOMEM") == 0);
    std::unique_ptr<KernelQueue> bare;
    const int r = KernelQueue::create(dev, RVGL_IP_COMPUTE, RVGL_PRIORITY_NORMAL, &bare);
    rvgl_emu_reset_fault_injection();
    REQUIRE(r == 0);
    REQUIRE(bare->submit({&nop_ib, 1}, {}, 0, &seq) == 0);
    test::wait_signalled(*bare, 1);
    uint64_t job = 0;
    CHECK(bare->job_error(1, &job, &unread, &shared) == 0);
    CHECK(job == 1);
    CHECK(bare->finished_point() == 0);
    CHECK_FALSE(bare->finished(1));
  }
}

TEST_CASE("on a kernel with entity errors the failed job is told apart by the user fence",
          "[user-fence]") {
  // Linux 6.5+ (RVGL_EMU_ENTITY_ERRORS=1): once a context's last job taken for the ring failed,
  // WAIT_CS answers that error for every job of it, the ones that ran to their end included.
  IbRig rig;
  const auto &dev = rig.dev;
  const rvgl_ib nop_ib = rig.nop_ib, fault_ib = rig.fault_ib;
  test::ScopedKnob stop("RVGL_EMU_VM_FAULT_STOP", "2");
  test::ScopedKnob entity("RVGL_EMU_ENTITY_ERRORS", "1", "0");
  REQUIRE(entity.ok());

  std::unique_ptr<KernelQueue> q;
  REQUIRE(KernelQueue::create(dev, RVGL_IP_COMPUTE, RVGL_PRIORITY_NORMAL, &q) == 0);
  uint64_t seq = 0;
  for (int i = 0; i < 2; ++i)
    REQUIRE(q->submit({&nop_ib, 1}, {}, 0, &seq) == 0);
  REQUIRE(q->submit({&fault_ib, 1}, {}, 0, &seq) == 0);  // 3 fails
  test::wait_signalled(*q, 3);
  CHECK(q->context_error() == -ETIME);
  uint64_t job = 0, failed = 0;
  bool unread = false, shared = false;
  CHECK(q->job_error(3, &job, &unread, &shared) == -ETIME);
  CHECK(job == 3);
  CHECK(shared);
  // Job 1 answers -ETIME too, but it wrote its user fence: the failure is job 3's.
  CHECK(q->first_error_between(0, 3, &failed, &unread, &shared) == -ETIME);
  CHECK(failed == 3);
  CHECK(shared);
  CHECK_FALSE(unread);
  // Nothing in (0, 2] failed, though the kernel answers -ETIME for both.
  CHECK(q->first_error_between(0, 2, &failed, &unread, &shared) == 0);
  CHECK(failed == 0);
}
