// Point 8 of issue 16 for user queues: a VM fault in a batch is recorded in the VM's fault cache;
// by default (amdgpu.vm_fault_stop=0) the faulting access is dropped and the queue goes on, with
// RVGL_EMU_VM_FAULT_STOP=2 the queue hangs at the fault and runs nothing more.
#include <catch2/catch.hpp>

#include "emu_test_support.h"

using namespace rvgl::emu_test;

namespace {

constexpr uint32_t kDoorbellIndex = 5;  // the queue's 64-bit doorbell in the doorbell object

// An SDMA user queue: rptr and wptr each at the start of a one-page object, the doorbell object
// mapped for the CPU. Work is published as the kernel's own rings do it
// (sdma_v6_0_ring_set_wptr): the write pointer, in bytes, to memory and to the doorbell.
struct SdmaUserQueue {
  Fd fd = open_render();
  GpuBuffer ring, rptr_page, wptr_page, meta, data;
  uint32_t doorbell = 0;
  volatile uint64_t *bells = nullptr;
  uint32_t id = 0;
  bool available = false;

  SdmaUserQueue() {
    REQUIRE(fd.get() >= 0);
    rvgl_drm_amdgpu_info_device info{};
    REQUIRE(query_info(fd.get(), AMDGPU_INFO_DEV_INFO, &info, sizeof(info)) == 0);
    available = (info.userq_ip_mask & (1u << AMDGPU_HW_IP_DMA)) != 0;
    if (!available) return;
    REQUIRE(ring.create(fd.get(), 64 * 1024, 0x10000000) == 0);
    REQUIRE(rptr_page.create(fd.get(), 4096, 0x10100000) == 0);
    REQUIRE(wptr_page.create(fd.get(), 4096, 0x10110000) == 0);
    REQUIRE(meta.create(fd.get(), 64 * 1024, 0x10200000) == 0);
    REQUIRE(data.create(fd.get(), 64 * 1024, 0x10300000) == 0);
    REQUIRE(gem_create(fd.get(), 4096, RVGL_AMDGPU_GEM_DOMAIN_DOORBELL, 0, &doorbell) == 0);
    bells = static_cast<volatile uint64_t *>(gem_cpu_map(fd.get(), doorbell, 4096));
    REQUIRE(bells);
    rvgl_drm_amdgpu_userq_mqd_sdma_gfx11 mqd{meta.va};
    rvgl_drm_amdgpu_userq q{};
    q.in.op = RVGL_AMDGPU_USERQ_OP_CREATE;
    q.in.ip_type = AMDGPU_HW_IP_DMA;
    q.in.doorbell_handle = doorbell;
    q.in.doorbell_offset = kDoorbellIndex;
    q.in.queue_va = ring.va;
    q.in.queue_size = ring.size;
    q.in.rptr_va = rptr_page.va;
    q.in.wptr_va = wptr_page.va;
    q.in.mqd = reinterpret_cast<uintptr_t>(&mqd);
    q.in.mqd_size = sizeof(mqd);
    REQUIRE(xioctl(fd.get(), RVGL_DRM_IOCTL_AMDGPU_USERQ, &q) == 0);
    id = q.out.queue_id;
  }
  ~SdmaUserQueue() {
    if (!available) return;
    rvgl_drm_amdgpu_userq q{};
    q.in.op = RVGL_AMDGPU_USERQ_OP_FREE;
    q.in.queue_id = id;
    xioctl(fd.get(), RVGL_DRM_IOCTL_AMDGPU_USERQ, &q);
    munmap(const_cast<uint64_t *>(bells), 4096);
    gem_close(fd.get(), doorbell);
  }
  uint64_t rptr() const { return *reinterpret_cast<volatile uint64_t *>(rptr_page.u8()); }
  void publish(const std::vector<uint32_t> &packets, uint64_t at_bytes) {
    std::memcpy(ring.u8() + at_bytes, packets.data(), packets.size() * 4);
    const uint64_t w = at_bytes + packets.size() * 4;
    *reinterpret_cast<volatile uint64_t *>(wptr_page.u8()) = w;
    __atomic_store_n(const_cast<uint64_t *>(bells + kDoorbellIndex), w, __ATOMIC_RELEASE);
  }
};

constexpr uint64_t kUnmapped = 0x7650000000ull;

}  // namespace

TEST_CASE("by default a user-queue batch with a VM fault is recorded and the queue goes on",
          "[userq][faults][vm_fault_stop]") {
  Knob k("RVGL_EMU_VM_FAULT_STOP", "0", "0");
  REQUIRE(k.rc() == 0);
  SdmaUserQueue q;
  if (!q.available) {
    SUCCEED("this profile has no SDMA user queues");
    return;
  }
  const auto before = counters();
  std::vector<uint32_t> pk;
  sdma::fence(pk, kUnmapped, 1);
  sdma::fence(pk, q.data.va, 42);
  q.publish(pk, 0);
  CHECK(eventually([&] { return q.rptr() == pk.size() * 4; }));
  CHECK(q.data.u32()[0] == 42);
  CHECK(counters().vm_faults == before.vm_faults + 1);
  CHECK(vm_fault(q.fd.get()).addr == kUnmapped);
  // The queue still runs what comes next.
  std::vector<uint32_t> more;
  sdma::fence(more, q.data.va + 4, 43);
  q.publish(more, pk.size() * 4);
  CHECK(eventually([&] { return q.data.u32()[1] == 43; }));
  CHECK(eventually([&] { return q.rptr() == (pk.size() + more.size()) * 4; }));
  CHECK(counters().vm_faults == before.vm_faults + 1);
  // Both batches ran to their end: the fault did not stop the first.
  CHECK(counters().userq_batches_completed == before.userq_batches_completed + 2);
  CHECK(counters().userq_batches_failed == before.userq_batches_failed);
}

TEST_CASE("with RVGL_EMU_VM_FAULT_STOP=2 a user queue hangs at its first VM fault",
          "[userq][faults][vm_fault_stop]") {
  Knob k("RVGL_EMU_VM_FAULT_STOP", "2", "0");
  REQUIRE(k.rc() == 0);
  SdmaUserQueue q;
  if (!q.available) {
    SUCCEED("this profile has no SDMA user queues");
    return;
  }
  const auto before = counters();
  std::vector<uint32_t> pk;
  sdma::fence(pk, kUnmapped, 1);
  sdma::fence(pk, q.data.va, 42);
  q.publish(pk, 0);
  REQUIRE(eventually([&] { return counters().vm_faults == before.vm_faults + 1; }));
  CHECK(vm_fault(q.fd.get()).addr == kUnmapped);
  CHECK(q.data.u32()[0] == 0);  // nothing after the fault ran
  CHECK(q.rptr() == 0);
}
