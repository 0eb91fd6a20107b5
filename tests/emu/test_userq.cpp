// Acceptance: a user queue executes packets written to its ring after a write-pointer bump, with no
// ioctl in between.
#include <catch2/catch.hpp>

#include "emu_test_support.h"

using namespace rvgl::emu_test;

namespace {

uint32_t userq_ip_mask(int fd) {
  rvgl_drm_amdgpu_info_device info{};
  REQUIRE(query_info(fd, AMDGPU_INFO_DEV_INFO, &info, sizeof(info)) == 0);
  return info.userq_ip_mask;
}

struct UserQueueSetup {
  Fd fd = open_render();
  GpuBuffer ring, ptrs, meta, data;
  uint32_t doorbell = 0;
  UserQueueSetup() {
    REQUIRE(fd.get() >= 0);
    REQUIRE(ring.create(fd.get(), 64 * 1024, 0x10000000) == 0);
    REQUIRE(ptrs.create(fd.get(), 4096, 0x10100000) == 0);
    REQUIRE(meta.create(fd.get(), 64 * 1024, 0x10200000) == 0);
    REQUIRE(data.create(fd.get(), 64 * 1024, 0x10300000) == 0);
    REQUIRE(gem_create(fd.get(), 4096, RVGL_AMDGPU_GEM_DOMAIN_DOORBELL, 0, &doorbell) == 0);
  }
  ~UserQueueSetup() { gem_close(fd.get(), doorbell); }
  uint64_t rptr_va() const { return ptrs.va; }
  uint64_t wptr_va() const { return ptrs.va + 64; }
  volatile uint64_t *rptr() const { return reinterpret_cast<volatile uint64_t *>(ptrs.u8()); }
  volatile uint64_t *wptr() const { return reinterpret_cast<volatile uint64_t *>(ptrs.u8() + 64); }

  int create(uint32_t ip, const void *mqd, uint64_t mqd_size, uint32_t *id) {
    rvgl_drm_amdgpu_userq q{};
    q.in.op = RVGL_AMDGPU_USERQ_OP_CREATE;
    q.in.ip_type = ip;
    q.in.doorbell_handle = doorbell;
    q.in.doorbell_offset = 0;
    q.in.queue_va = ring.va;
    q.in.queue_size = ring.size;
    q.in.rptr_va = rptr_va();
    q.in.wptr_va = wptr_va();
    q.in.mqd = reinterpret_cast<uintptr_t>(mqd);
    q.in.mqd_size = mqd_size;
    const int r = xioctl(fd.get(), RVGL_DRM_IOCTL_AMDGPU_USERQ, &q);
    if (r == 0) *id = q.out.queue_id;
    return r;
  }
  int free_queue(uint32_t id) {
    rvgl_drm_amdgpu_userq q{};
    q.in.op = RVGL_AMDGPU_USERQ_OP_FREE;
    q.in.queue_id = id;
    return xioctl(fd.get(), RVGL_DRM_IOCTL_AMDGPU_USERQ, &q);
  }
};

}  // namespace

TEST_CASE("a compute user queue runs what is written to its ring", "[userq][acceptance]") {
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
  CHECK(md.compute.eop_size > 0);

  rvgl_drm_amdgpu_userq_mqd_compute_gfx11 mqd{s.meta.va};
  uint32_t id = 0;
  *s.wptr() = 0;
  REQUIRE(s.create(AMDGPU_HW_IP_COMPUTE, &mqd, sizeof(mqd), &id) == 0);
  CHECK(id >= 1);

  // Write packets, then publish them by bumping the write pointer (in dwords).
  std::vector<uint32_t> pk;
  pm4::write_data(pk, s.data.va + 0, {0xfeedf00d});
  pm4::release_mem64(pk, s.data.va + 8, 0x0102030405060708ull);
  std::memcpy(s.ring.u8(), pk.data(), pk.size() * 4);
  CHECK(s.data.u32()[0] == 0);
  *s.wptr() = pk.size();
  CHECK(eventually([&] { return s.data.u32()[0] == 0xfeedf00d; }));
  CHECK(eventually([&] { return *s.rptr() == pk.size(); }));
  uint64_t v;
  std::memcpy(&v, s.data.u8() + 8, 8);
  CHECK(v == 0x0102030405060708ull);

  // A second batch, wrapping around the end of the ring.
  const uint64_t ring_dw = s.ring.size / 4;
  uint64_t w = ring_dw - 2;
  *s.rptr() = 0;
  std::vector<uint32_t> nops(w - pk.size(), 0x80000000u);  // type-2 fillers up to the wrap
  std::memcpy(s.ring.u8() + pk.size() * 4, nops.data(), nops.size() * 4);
  *s.wptr() = w;
  REQUIRE(eventually([&] { return *s.rptr() == w; }));
  std::vector<uint32_t> wrap;
  pm4::write_data(wrap, s.data.va + 64, {0xa, 0xb, 0xc});
  for (size_t i = 0; i < wrap.size(); ++i)
    s.ring.u32()[(w + i) % ring_dw] = wrap[i];
  *s.wptr() = w + wrap.size();
  CHECK(eventually([&] { return s.data.u32()[18] == 0xc; }));
  CHECK(s.data.u32()[16] == 0xa);

  CHECK(s.free_queue(id) == 0);
  CHECK(s.free_queue(id) == -EINVAL);
}

TEST_CASE("an SDMA user queue counts its pointers in bytes", "[userq][acceptance]") {
  UserQueueSetup s;
  if (!(userq_ip_mask(s.fd.get()) & (1u << AMDGPU_HW_IP_DMA))) {
    SUCCEED("this profile has no SDMA user queues");
    return;
  }
  rvgl_drm_amdgpu_userq_mqd_sdma_gfx11 mqd{s.meta.va};
  uint32_t id = 0;
  *s.wptr() = 0;
  REQUIRE(s.create(AMDGPU_HW_IP_DMA, &mqd, sizeof(mqd), &id) == 0);
  std::memset(s.data.u8(), 0x11, 4096);
  std::vector<uint32_t> pk;
  sdma::copy_linear(pk, s.data.va + 8192, s.data.va, 4096);
  sdma::fence(pk, s.data.va + 16384, 42);
  std::memcpy(s.ring.u8(), pk.data(), pk.size() * 4);
  *s.wptr() = pk.size() * 4;
  CHECK(eventually([&] { return s.data.u32()[4096] == 42; }));
  CHECK(s.data.u8()[8192 + 4095] == 0x11);
  CHECK(eventually([&] { return *s.rptr() == pk.size() * 4; }));
  CHECK(s.free_queue(id) == 0);
}

TEST_CASE("user queue creation checks its arguments", "[userq]") {
  UserQueueSetup s;
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
  if (!(mask & (1u << AMDGPU_HW_IP_COMPUTE))) return;
  CHECK(s.create(AMDGPU_HW_IP_COMPUTE, &mqd, sizeof(mqd) + 8, &id) == -EINVAL);  // MQD size
  // The ring outside any mapping.
  GpuBuffer &ring = s.ring;
  REQUIRE(gem_va(s.fd.get(), AMDGPU_VA_OP_UNMAP, ring.handle, ring.va, 0, ring.size) == 0);
  CHECK(s.create(AMDGPU_HW_IP_COMPUTE, &mqd, sizeof(mqd), &id) == -EINVAL);
  REQUIRE(gem_va(s.fd.get(), AMDGPU_VA_OP_MAP, ring.handle, ring.va, 0, ring.size) == 0);
  // A doorbell that is not a doorbell object.
  const uint32_t real_doorbell = s.doorbell;
  s.doorbell = s.data.handle;
  CHECK(s.create(AMDGPU_HW_IP_COMPUTE, &mqd, sizeof(mqd), &id) == -EINVAL);
  s.doorbell = real_doorbell;
  CHECK(s.create(AMDGPU_HW_IP_COMPUTE, &mqd, sizeof(mqd), &id) == 0);
  // Closing the file frees the queue (and stops its worker).
  const auto before = counters();
  CHECK(before.userqs_alive >= 1);
}
