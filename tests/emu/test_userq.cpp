// Acceptance: a user queue executes packets written to its ring when its doorbell is written, with
// the kernel's units (amdgpu_userq.c, mes_userqueue.c), and no ioctl in between.
#include <catch2/catch.hpp>

#include <optional>

#include "emu_test_support.h"

using namespace rvgl::emu_test;

namespace {

uint32_t userq_ip_mask(int fd) {
  rvgl_drm_amdgpu_info_device info{};
  REQUIRE(query_info(fd, AMDGPU_INFO_DEV_INFO, &info, sizeof(info)) == 0);
  return info.userq_ip_mask;
}

constexpr uint32_t kDoorbell = 5;  // the queue's doorbell: byte 40 of the doorbell object

struct UserQueueSetup {
  Fd fd = open_render();
  // rptr and wptr each at the start of a one-page object: amdgpu_userq_create() validates a GPU
  // page from each, and mes_userq_create_wptr_mapping() takes no wptr object above one page.
  GpuBuffer ring, rptr_page, wptr_page, meta, data;
  uint32_t doorbell = 0;
  volatile uint64_t *bells = nullptr;  // the doorbell object, as the CPU maps it
  UserQueueSetup() {
    REQUIRE(fd.get() >= 0);
    REQUIRE(ring.create(fd.get(), 64 * 1024, 0x10000000) == 0);
    REQUIRE(rptr_page.create(fd.get(), 4096, 0x10100000) == 0);
    REQUIRE(wptr_page.create(fd.get(), 4096, 0x10110000) == 0);
    REQUIRE(meta.create(fd.get(), 64 * 1024, 0x10200000) == 0);
    REQUIRE(data.create(fd.get(), 64 * 1024, 0x10300000) == 0);
    REQUIRE(gem_create(fd.get(), 4096, RVGL_AMDGPU_GEM_DOMAIN_DOORBELL, 0, &doorbell) == 0);
    bells = static_cast<volatile uint64_t *>(gem_cpu_map(fd.get(), doorbell, 4096));
    REQUIRE(bells);
  }
  ~UserQueueSetup() {
    munmap(const_cast<uint64_t *>(bells), 4096);
    gem_close(fd.get(), doorbell);
  }
  volatile uint32_t *rptr32() const {
    return reinterpret_cast<volatile uint32_t *>(rptr_page.u8());
  }
  volatile uint64_t *rptr64() const {
    return reinterpret_cast<volatile uint64_t *>(rptr_page.u8());
  }
  volatile uint64_t *wptr() const { return reinterpret_cast<volatile uint64_t *>(wptr_page.u8()); }
  // What gfx_v11_0_ring_set_wptr_compute() does for the kernel's own rings: the 64-bit write
  // pointer to memory, then the same value to the queue's 64-bit doorbell.
  void ring_doorbell(uint64_t w, uint32_t index = kDoorbell) {
    *wptr() = w;
    __atomic_store_n(const_cast<uint64_t *>(bells + index), w, __ATOMIC_RELEASE);
  }

  rvgl_drm_amdgpu_userq_in args(uint32_t ip, const void *mqd, uint64_t mqd_size) const {
    rvgl_drm_amdgpu_userq_in in{};
    in.op = RVGL_AMDGPU_USERQ_OP_CREATE;
    in.ip_type = ip;
    in.doorbell_handle = doorbell;
    in.doorbell_offset = kDoorbell;
    in.queue_va = ring.va;
    in.queue_size = ring.size;
    in.rptr_va = rptr_page.va;
    in.wptr_va = wptr_page.va;
    in.mqd = reinterpret_cast<uintptr_t>(mqd);
    in.mqd_size = mqd_size;
    return in;
  }
  int create(const rvgl_drm_amdgpu_userq_in &in, uint32_t *id) {
    rvgl_drm_amdgpu_userq q{};
    q.in = in;
    const int r = xioctl(fd.get(), RVGL_DRM_IOCTL_AMDGPU_USERQ, &q);
    if (r == 0) *id = q.out.queue_id;
    return r;
  }
  int create(uint32_t ip, const void *mqd, uint64_t mqd_size, uint32_t *id) {
    return create(args(ip, mqd, mqd_size), id);
  }
  int free_queue(uint32_t id) {
    rvgl_drm_amdgpu_userq q{};
    q.in.op = RVGL_AMDGPU_USERQ_OP_FREE;
    q.in.queue_id = id;
    return xioctl(fd.get(), RVGL_DRM_IOCTL_AMDGPU_USERQ, &q);
  }
  int query_status(uint32_t id, uint32_t *flags) {
    rvgl_drm_amdgpu_userq q{};
    q.in.op = RVGL_AMDGPU_USERQ_OP_QUERY_STATUS;
    q.in.queue_id = id;
    const int r = xioctl(fd.get(), RVGL_DRM_IOCTL_AMDGPU_USERQ, &q);
    if (r == 0) *flags = q.out_qs.flags;
    return r;
  }
};

}  // namespace

TEST_CASE("a compute user queue runs what its doorbell announces", "[userq][acceptance]") {
  UserQueueSetup s;
  if (!(userq_ip_mask(s.fd.get()) & (1u << AMDGPU_HW_IP_COMPUTE))) {
    uint32_t id;
    rvgl_drm_amdgpu_userq_mqd_compute_gfx11 mqd{s.meta.va};
    CHECK(s.create(AMDGPU_HW_IP_COMPUTE, &mqd, sizeof(mqd), &id) == -EINVAL);
    SUCCEED("this profile has no compute user queues");
    return;
  }
  rvgl_drm_amdgpu_info_uq_metadata md{};
  REQUIRE(query_info(s.fd.get(), RVGL_AMDGPU_INFO_UQ_FW_AREAS, &md, sizeof(md),
                     AMDGPU_HW_IP_COMPUTE) == 0);
  CHECK(md.compute.eop_size == 2048);
  CHECK(md.compute.eop_alignment == 256);

  // More than a ring's worth: a queue that took this as its write pointer would hang at once.
  const uint64_t poison = s.ring.size / 4 + 1;
  rvgl_drm_amdgpu_userq_mqd_compute_gfx11 mqd{s.meta.va};
  uint32_t id = 0;
  s.bells[kDoorbell] = poison;  // what the doorbell held before the queue is not a write to it
  REQUIRE(s.create(AMDGPU_HW_IP_COMPUTE, &mqd, sizeof(mqd), &id) == 0);
  CHECK(id == 1);
  const auto before = counters();
  uint32_t flags = 7;
  CHECK(s.query_status(id, &flags) == 0);
  CHECK(flags == 0);

  std::vector<uint32_t> pk;
  pm4::write_data(pk, s.data.va + 0, {0xfeedf00d});
  pm4::release_mem64(pk, s.data.va + 8, 0x0102030405060708ull);
  std::memcpy(s.ring.u8(), pk.data(), pk.size() * 4);

  // The queue reads its own doorbell and nothing else: the write pointer in memory, the next
  // doorbell, and the dword a dword-counting guest would pick (byte 20, inside doorbell 2) all
  // hold the poison; had the queue looked at any of them it would be hung.
  *s.wptr() = poison;
  s.bells[kDoorbell + 1] = poison;
  reinterpret_cast<volatile uint32_t *>(s.bells)[kDoorbell] = static_cast<uint32_t>(poison);
  __atomic_store_n(const_cast<uint64_t *>(s.bells + kDoorbell), pk.size(), __ATOMIC_RELEASE);
  CHECK(eventually([&] { return s.data.u32()[0] == 0xfeedf00d; }));
  CHECK(s.query_status(id, &flags) == 0);
  CHECK(flags == 0);
  // The CP reports CP_HQD_PQ_RPTR: a 32-bit dword offset in the ring.
  CHECK(eventually([&] { return *s.rptr32() == pk.size(); }));
  uint64_t v;
  std::memcpy(&v, s.data.u8() + 8, 8);
  CHECK(v == 0x0102030405060708ull);

  // A second batch, wrapping around the end of the ring: the write pointer keeps counting, the
  // read pointer comes back modulo the ring.
  const uint64_t ring_dw = s.ring.size / 4;
  const uint64_t w = ring_dw - 2;
  std::vector<uint32_t> nops(w - pk.size(), 0x80000000u);  // type-2 fillers up to the wrap
  std::memcpy(s.ring.u8() + pk.size() * 4, nops.data(), nops.size() * 4);
  s.ring_doorbell(w);
  REQUIRE(eventually([&] { return *s.rptr32() == w; }));
  std::vector<uint32_t> wrap;
  pm4::write_data(wrap, s.data.va + 64, {0xa, 0xb, 0xc});
  for (size_t i = 0; i < wrap.size(); ++i)
    s.ring.u32()[(w + i) % ring_dw] = wrap[i];
  s.ring_doorbell(w + wrap.size());
  CHECK(eventually([&] { return s.data.u32()[18] == 0xc; }));
  CHECK(s.data.u32()[16] == 0xa);
  CHECK(eventually([&] { return *s.rptr32() == (w + wrap.size()) % ring_dw; }));
  // Three doorbell writes, each waited for: three batches, none a CS job (counted before the
  // read pointer is written).
  const auto after = counters();
  CHECK(after.userq_batches_completed - before.userq_batches_completed == 3);
  CHECK(after.userq_batches_failed == before.userq_batches_failed);
  CHECK(after.jobs_submitted == before.jobs_submitted);

  CHECK(s.free_queue(id) == 0);
  CHECK(s.free_queue(id) == -ENOENT);
  CHECK(s.query_status(id, &flags) == -EINVAL);
}

TEST_CASE("an SDMA user queue counts its pointers and doorbell in bytes", "[userq][acceptance]") {
  UserQueueSetup s;
  if (!(userq_ip_mask(s.fd.get()) & (1u << AMDGPU_HW_IP_DMA))) {
    SUCCEED("this profile has no SDMA user queues");
    return;
  }
  rvgl_drm_amdgpu_info_uq_metadata md{};
  REQUIRE(query_info(s.fd.get(), RVGL_AMDGPU_INFO_UQ_FW_AREAS, &md, sizeof(md), AMDGPU_HW_IP_DMA) ==
          0);
  CHECK(md.sdma.csa_size == 32);
  rvgl_drm_amdgpu_userq_mqd_sdma_gfx11 mqd{s.meta.va};
  uint32_t id = 0;
  REQUIRE(s.create(AMDGPU_HW_IP_DMA, &mqd, sizeof(mqd), &id) == 0);
  std::memset(s.data.u8(), 0x11, 4096);
  std::vector<uint32_t> pk;
  sdma::copy_linear(pk, s.data.va + 8192, s.data.va, 4096);
  sdma::fence(pk, s.data.va + 16384, 42);
  std::memcpy(s.ring.u8(), pk.data(), pk.size() * 4);
  s.ring_doorbell(pk.size() * 4);  // sdma_v6_0_ring_set_wptr(): ring->wptr << 2
  CHECK(eventually([&] { return s.data.u32()[4096] == 42; }));
  CHECK(s.data.u8()[8192 + 4095] == 0x11);
  CHECK(eventually([&] { return *s.rptr64() == pk.size() * 4; }));
  CHECK(s.free_queue(id) == 0);
}

TEST_CASE("a user queue that faults stops, and QUERY_STATUS says it is hung", "[userq]") {
  Knob stop("RVGL_EMU_VM_FAULT_STOP", "2", "0");  // the stopping behaviour (vm_fault_stop=2)
  UserQueueSetup s;
  if (!(userq_ip_mask(s.fd.get()) & (1u << AMDGPU_HW_IP_COMPUTE))) return;
  rvgl_drm_amdgpu_userq_mqd_compute_gfx11 mqd{s.meta.va};
  uint32_t id = 0;
  REQUIRE(s.create(AMDGPU_HW_IP_COMPUTE, &mqd, sizeof(mqd), &id) == 0);
  const auto before = counters();
  std::vector<uint32_t> pk;
  pm4::write_data(pk, 0x7000000000ull, {1});  // nothing is mapped there
  std::memcpy(s.ring.u8(), pk.data(), pk.size() * 4);
  s.ring_doorbell(pk.size());
  uint32_t flags = 0;
  CHECK(eventually([&] {
    return s.query_status(id, &flags) == 0 && flags == RVGL_AMDGPU_USERQ_QUERY_STATUS_FLAGS_HUNG;
  }));
  CHECK(counters().vm_faults == before.vm_faults + 1);
  CHECK(counters().userq_batches_failed == before.userq_batches_failed + 1);
  CHECK(counters().userq_batches_completed == before.userq_batches_completed);
  CHECK(vm_fault(s.fd.get()).addr == 0x7000000000ull);  // the fault cache has it
  CHECK(*s.rptr32() == 0);                              // nothing more ran
  CHECK(s.free_queue(id) == 0);
}

TEST_CASE("user queue creation checks its arguments as the kernel does", "[userq]") {
  const uint64_t alive0 = counters().userqs_alive;
  std::optional<UserQueueSetup> setup;
  UserQueueSetup &s = setup.emplace();
  const uint32_t mask = userq_ip_mask(s.fd.get());
  rvgl_drm_amdgpu_userq_mqd_compute_gfx11 mqd{s.meta.va};
  uint32_t id = 0;
  rvgl_drm_amdgpu_userq q{};
  q.in.op = 7;
  CHECK(xioctl(s.fd.get(), RVGL_DRM_IOCTL_AMDGPU_USERQ, &q) == -EINVAL);
  q = {};
  q.in.op = RVGL_AMDGPU_USERQ_OP_FREE;
  q.in.queue_id = 1;
  q.in.flags = 1;  // FREE takes nothing but the id
  CHECK(xioctl(s.fd.get(), RVGL_DRM_IOCTL_AMDGPU_USERQ, &q) == -EINVAL);
  CHECK(s.free_queue(9) == -ENOENT);
  if (!(mask & (1u << AMDGPU_HW_IP_COMPUTE))) return;
  const auto good = s.args(AMDGPU_HW_IP_COMPUTE, &mqd, sizeof(mqd));
  auto bad = good;
  bad.mqd_size += 8;
  CHECK(s.create(bad, &id) == -EINVAL);  // MQD size
  bad = good;
  bad.queue_size = 3 * 4096;  // amdgpu_userq_input_args_validate(): a power of 2
  CHECK(s.create(bad, &id) == -EINVAL);
  bad.queue_size = 2048;  // ... of at least one GPU page
  CHECK(s.create(bad, &id) == -EINVAL);
  bad = good;
  bad.doorbell_offset = 512;  // (512 + 1) * 8 > 4096
  CHECK(s.create(bad, &id) == -EINVAL);
  bad = good;
  bad.rptr_va = s.rptr_page.va + 8;  // a GPU page from rptr_va runs past its mapping
  CHECK(s.create(bad, &id) == -EINVAL);
  bad = good;
  bad.wptr_va = s.meta.va;  // a 64 KiB object behind the write pointer
  CHECK(s.create(bad, &id) == -EINVAL);
  rvgl_drm_amdgpu_userq_mqd_compute_gfx11 late_eop{s.meta.va + s.meta.size - 1024};
  bad = s.args(AMDGPU_HW_IP_COMPUTE, &late_eop, sizeof(late_eop));
  CHECK(s.create(bad, &id) == -EINVAL);  // 2048 EOP bytes do not fit
  // The ring outside any mapping.
  GpuBuffer &ring = s.ring;
  REQUIRE(gem_va(s.fd.get(), AMDGPU_VA_OP_UNMAP, ring.handle, ring.va, 0, ring.size) == 0);
  CHECK(s.create(good, &id) == -EINVAL);
  REQUIRE(gem_va(s.fd.get(), AMDGPU_VA_OP_MAP, ring.handle, ring.va, 0, ring.size) == 0);
  // A doorbell that is not a doorbell object.
  bad = good;
  bad.doorbell_handle = s.data.handle;
  CHECK(s.create(bad, &id) == -EINVAL);
  bad.doorbell_offset = 511;  // the last doorbell of the object
  bad.doorbell_handle = s.doorbell;
  uint32_t last = 0;
  CHECK(s.create(bad, &last) == 0);
  CHECK(s.create(good, &id) == 0);
  uint32_t again = 0;
  CHECK(s.create(good, &again) == -EBUSY);  // one queue per doorbell
  CHECK(s.free_queue(last) == 0);
  CHECK(counters().userqs_alive == alive0 + 1);  // `id`: `last` was freed, `again` refused
  // Closing the file frees the queue (and stops its worker), as amdgpu_userq_mgr_fini() does.
  setup.reset();
  CHECK(counters().userqs_alive == alive0);
}
