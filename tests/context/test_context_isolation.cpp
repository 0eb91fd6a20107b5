// Issue 4: two contexts on one GPU have separate VMs and separate names.
#include <catch2/catch.hpp>

#include <cerrno>

#include "../tools/common/amd_packets.h"
#include "support/context_harness.h"

using namespace rvgl;
using namespace rvgl::test;
namespace pk = rvgl::packets;

TEST_CASE("contexts cannot name each other's objects, resources or queues",
          "[context][isolation]") {
  ContextHarness a(test_config(), false, 1), b(test_config(), false, 2);
  a.create_shmem();
  b.create_shmem();
  int32_t r;
  const uint32_t bo_a = a.bo_create(1 << 20, RVGL_DOMAIN_VRAM, 0, 0, &r);
  REQUIRE(r == 0);
  const uint32_t q_a = a.queue_create(RVGL_IP_COMPUTE, 1, &r);
  REQUIRE(r == 0);
  auto buf_a = a.mapped_bo(4096);

  // B has nothing under those numbers: a handle forged from A's numbers is refused.
  const uint64_t va = b.capset().va_start;
  CHECK(b.va_map(bo_a, 0, 0, va, 4096) == -ENOENT);
  CHECK(b.bo_free(bo_a) == -ENOENT);
  CHECK(b.va_map(0, buf_a.res_id, 0, va, 4096) == -ENOENT);
  CHECK(b.queue_state(q_a).hdr.result == -ENOENT);
  CHECK(b.queue_destroy(q_a) == -ENOENT);
  CHECK_FALSE(b.ctx().has_resource(buf_a.res_id));
  BlobExport e;
  CHECK(b.ctx().export_resource(buf_a.res_id, &e) == -ENOENT);

  // A still has all of it.
  CHECK(a.va_map(bo_a, 0, 0, va, 4096) == 0);
  CHECK(a.queue_state(q_a).hdr.result == 0);
}

TEST_CASE("the same GPU VA maps different memory in each context", "[context][isolation]") {
  ContextHarness a(test_config(), false, 1), b(test_config(), false, 2);
  a.create_shmem();
  b.create_shmem();
  const uint64_t va = a.capset().va_start;
  REQUIRE(va == b.capset().va_start);

  struct Side {
    ContextHarness &h;
    ContextHarness::HostBuffer data, ib;
    uint32_t queue = 0;
  };
  auto setup = [&](ContextHarness &h, uint32_t marker) {
    Side s{h, h.mapped_bo(4096), h.mapped_bo(4096)};
    REQUIRE(h.va_map(s.data.bo, 0, 0, va, 4096) == 0);
    REQUIRE(h.va_map(s.ib.bo, 0, 0, va + 0x100000, 4096) == 0);
    int32_t r;
    s.queue = h.queue_create(RVGL_IP_COMPUTE, 1, &r);
    REQUIRE(r == 0);
    std::vector<uint32_t> dw;
    pk::pm4_write_data(dw, va, {marker});
    h.submit(s.queue, {ContextHarness::write_ib(s.ib, va + 0x100000, dw)}, {}, &r);
    REQUIRE(r == 0);
    REQUIRE(h.fence(1, 1) == 0);
    return s;
  };
  Side sa = setup(a, 0xaaaa0001u);
  Side sb = setup(b, 0xbbbb0002u);
  REQUIRE(a.wait_fence(1, 1));
  REQUIRE(b.wait_fence(1, 1));
  CHECK(sa.data.ptr<uint32_t>()[0] == 0xaaaa0001u);
  CHECK(sb.data.ptr<uint32_t>()[0] == 0xbbbb0002u);
}
