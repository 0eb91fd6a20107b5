// Issue 4: a guest program's flow end to end, fence ordering, cross-queue waits, fence modes.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <numeric>
#include <thread>

#include "../tools/common/amd_packets.h"
#include "support/context_harness.h"
#include "support/gate_watchdog.h"
#include "support/scoped_knob.h"

using namespace rvgl;
using namespace rvgl::test;
namespace pk = rvgl::packets;

namespace {

constexpr uint64_t kMiB = 1ull << 20;

}  // namespace

TEST_CASE("guest flow: VRAM blob, VA_MAP, SDMA copy and PM4 write, fences in order", "[context]") {
  ContextHarness h;
  h.create_shmem();
  const uint64_t va0 = h.capset().va_start;

  // Source: VRAM the guest fills through the blob mapping. Destination: a second VRAM BO.
  auto src = h.mapped_bo(kMiB, RVGL_DOMAIN_VRAM, RVGL_BO_FLAG_CPU_ACCESS);
  auto dst = h.mapped_bo(kMiB, RVGL_DOMAIN_VRAM, RVGL_BO_FLAG_CPU_ACCESS);
  auto ib = h.mapped_bo(64 * 1024);
  auto *s = src.ptr<uint32_t>();
  std::iota(s, s + kMiB / 4, 0x1000u);

  const uint64_t src_va = va0, dst_va = va0 + kMiB, ib_va = va0 + 2 * kMiB;
  REQUIRE(h.va_map(src.bo, 0, 0, src_va, kMiB) == 0);
  REQUIRE(h.va_map(0, dst.res_id, 0, dst_va, kMiB) == 0);  // by resource id this time
  REQUIRE(h.va_map(ib.bo, 0, 0, ib_va, 64 * 1024, RVGL_VA_FLAG_READ | RVGL_VA_FLAG_EXECUTE) == 0);

  int32_t r;
  const uint32_t sdma = h.queue_create(RVGL_IP_SDMA, 1, &r);
  REQUIRE(r == 0);
  const uint32_t compute = h.queue_create(RVGL_IP_COMPUTE, 2, &r);
  REQUIRE(r == 0);

  std::vector<uint32_t> copy;
  pk::sdma_copy_linear(copy, dst_va, src_va, kMiB / 2);
  pk::sdma_copy_linear(copy, dst_va + kMiB / 2, src_va + kMiB / 2, kMiB / 2);
  pk::sdma_pad(copy);
  const uint64_t seq1 = h.submit(sdma, {ContextHarness::write_ib(ib, ib_va, copy)}, {}, &r);
  REQUIRE(r == 0);
  CHECK(seq1 == 1);
  REQUIRE(h.fence(1, 101) == 0);

  // PM4 WRITE_DATA of a marker after the copy (waits on the SDMA queue's seq 1).
  std::vector<uint32_t> write;
  pk::pm4_write_data(write, dst_va + kMiB - 8, {0xc0ffee01u, 0xc0ffee02u});
  const uint64_t seq2 =
      h.submit(compute, {ContextHarness::write_ib(ib, ib_va, write, 4096)}, {{sdma, 0, seq1}}, &r);
  REQUIRE(r == 0);
  CHECK(seq2 == 1);
  REQUIRE(h.fence(2, 201) == 0);
  REQUIRE(h.fence(0, 1) == 0);

  REQUIRE(h.wait_fence(1, 101));
  REQUIRE(h.wait_fence(2, 201));
  REQUIRE(h.wait_fence(0, 1));

  const auto *d = dst.ptr<uint32_t>();
  CHECK(std::memcmp(d, s, kMiB - 8) == 0);
  CHECK(d[kMiB / 4 - 2] == 0xc0ffee01u);
  CHECK(d[kMiB / 4 - 1] == 0xc0ffee02u);

  auto st = h.queue_state(sdma);
  CHECK(st.hdr.result == 0);
  CHECK(st.state == RVGL_QUEUE_STATE_OK);
  CHECK(st.last_submitted_seq == 1);
  CHECK(st.last_completed_seq == 1);
}

TEST_CASE("fences on one ring retire in order and never before the GPU job", "[context]") {
  ContextHarness h;
  h.create_shmem();
  const uint64_t va0 = h.capset().va_start;
  auto buf = h.mapped_bo(64 * 1024);
  auto ib = h.mapped_bo(64 * 1024);
  REQUIRE(h.va_map(buf.bo, 0, 0, va0, 64 * 1024) == 0);
  REQUIRE(h.va_map(ib.bo, 0, 0, va0 + kMiB, 64 * 1024) == 0);
  int32_t r;
  const uint32_t q = h.queue_create(RVGL_IP_COMPUTE, 5, &r);
  REQUIRE(r == 0);

  std::vector<uint64_t> ids;
  for (uint32_t i = 0; i < 8; ++i) {
    std::vector<uint32_t> dw;
    pk::pm4_write_data(dw, va0 + i * 4, {i + 1});
    h.submit(q, {ContextHarness::write_ib(ib, va0 + kMiB, dw, i * 256)}, {}, &r);
    REQUIRE(r == 0);
    REQUIRE(h.fence(5, 1000 + i) == 0);
    ids.push_back(1000 + i);
  }
  REQUIRE(h.wait_fence(5, ids.back()));
  // Every fence retired, in creation order, and each job's write is visible when its fence is.
  std::vector<uint64_t> seen;
  for (const auto &f : h.fences().snapshot())
    if (f.ring == 5) seen.push_back(f.id);
  CHECK(seen == ids);
  for (uint32_t i = 0; i < 8; ++i)
    CHECK(buf.ptr<uint32_t>()[i] == i + 1);
}

TEST_CASE("a mergeable fence retires with its own job, not with work submitted after it",
          "[context][fence]") {
  // QEMU and crosvm send every ring fence MERGEABLE. Merging decides how fences done together are
  // reported; a fence must not wait for a later job, which the guest may hold until it has seen
  // that fence (a stream waiting on a value its host thread writes once an earlier job is done).
  ScopedKnob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "30000", "2000");
  // Job 1 still runs when its fence and job 2 come (a fence for work already done retires at
  // once, whatever comes after).
  ScopedKnob slow("RVGL_EMU_JOB_LATENCY_US", "20000", "0");
  REQUIRE((lockup.ok() && slow.ok()));
  const bool async = GENERATE(false, true);
  INFO((async ? "async callbacks" : "poll mode"));
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    ContextHarness h(test_config(), async);
    h.create_shmem();
    const uint64_t va0 = h.capset().va_start;
    auto buf = h.mapped_bo(64 * 1024);
    REQUIRE(h.va_map(buf.bo, 0, 0, va0, 64 * 1024) == 0);
    int32_t r;
    const uint32_t q = h.queue_create(RVGL_IP_SDMA, 1, &r);
    REQUIRE(r == 0);
    uint32_t *gate = buf.ptr<uint32_t>() + 1024;  // at va0 + 4 KiB
    GateWatchdog watchdog(gate);                  // opened below, or in 10 s
    // Job 1 writes a word; job 2 waits at the gate, then writes another. A fence after each.
    std::vector<uint32_t> first, second;
    pk::sdma_write_linear(first, va0, {1});
    pk::sdma_pad(first);
    pk::sdma_poll_mem_equal(second, va0 + 4096, 1, 0xffffffffu);
    pk::sdma_write_linear(second, va0 + 4, {2});
    pk::sdma_pad(second);
    h.submit(q, {ContextHarness::write_ib(buf, va0, first, 8192)}, {}, &r);
    REQUIRE(r == 0);
    REQUIRE(h.fence(1, 11, true) == 0);
    h.submit(q, {ContextHarness::write_ib(buf, va0, second, 12288)}, {}, &r);
    REQUIRE(r == 0);
    REQUIRE(h.fence(1, 12, true) == 0);
    CHECK(h.wait_fence(1, 11, 3000));
    CHECK(buf.ptr<uint32_t>()[0] == 1);
    CHECK_FALSE(h.fences().has(1, 12));
    watchdog.open();
    CHECK(h.wait_fence(1, 12));
    CHECK(buf.ptr<uint32_t>()[1] == 2);
    CHECK(h.fences().size() == 2);
  }
}

TEST_CASE("a fence on a ring with no work, or on ring 0, retires at once", "[context]") {
  ContextHarness h;
  REQUIRE(h.fence(0, 7) == 0);
  REQUIRE(h.fence(30, 8) == 0);  // unbound ring
  CHECK(h.wait_fence(0, 7));
  CHECK(h.wait_fence(30, 8));
  CHECK(h.fence(64, 9) == -EINVAL);
}

TEST_CASE("without ASYNC_FENCE_CB fences arrive through the poll fd on the caller's thread",
          "[context]") {
  ContextHarness h(test_config(), /*async=*/false);
  REQUIRE(h.fence(0, 42) == 0);
  REQUIRE(h.wait_fence(0, 42));
  const auto log = h.fences().snapshot();
  REQUIRE(log.size() == 1);
  CHECK(log[0].thread == std::this_thread::get_id());
}

TEST_CASE("with ASYNC_FENCE_CB a fence with nothing to wait for is delivered at once",
          "[context]") {
  ContextHarness h(test_config(), /*async=*/true);
  REQUIRE(h.fence(0, 42) == 0);
  // Delivered inside create_fence, on the caller's thread: no hop, no wakeup.
  const auto log = h.fences().snapshot();
  REQUIRE(log.size() == 1);
  CHECK(log[0].thread == std::this_thread::get_id());
}

TEST_CASE(
    "SUBMIT takes only what the kernel's rings run as named: IB count, SDMA IB alignment, "
    "IB length",
    "[context][malformed]") {
  ContextHarness h;
  h.create_shmem();
  // amdgpu_ring_max_ibs(): COMPUTE 125, SDMA 49; the capset gives the smaller, below the
  // host's default of 64.
  CHECK(h.capset().max_ibs_per_submit == 49);

  const uint64_t va0 = h.capset().va_start;
  auto buf = h.mapped_bo(64 * 1024);
  auto ib = h.mapped_bo(64 * 1024);
  const uint64_t buf_va = va0, ib_va = va0 + kMiB;
  REQUIRE(h.va_map(buf.bo, 0, 0, buf_va, 64 * 1024) == 0);
  REQUIRE(h.va_map(ib.bo, 0, 0, ib_va, 64 * 1024, RVGL_VA_FLAG_READ | RVGL_VA_FLAG_EXECUTE) == 0);
  int32_t r;
  const uint32_t sdma = h.queue_create(RVGL_IP_SDMA, 1, &r);
  REQUIRE(r == 0);
  const uint32_t compute = h.queue_create(RVGL_IP_COMPUTE, 2, &r);
  REQUIRE(r == 0);

  // One IB per byte offset that is a multiple of 16 but not 32: the engine would run the 16 bytes
  // before it. Refused, and nothing reaches the kernel.
  std::vector<uint32_t> write;
  pk::sdma_write_linear(write, buf_va, {0x5d3a0001u});
  pk::sdma_pad(write);
  const rvgl_ib at48 = ContextHarness::write_ib(ib, ib_va, write, 48);
  const rvgl_ib at64 = ContextHarness::write_ib(ib, ib_va, write, 64);
  auto sub = [&](uint32_t q, std::vector<rvgl_ib> ibs) {
    int32_t res;
    h.submit(q, std::move(ibs), {}, &res);
    return res;
  };
  CHECK(sub(sdma, {at48}) == -EINVAL);
  CHECK(sub(sdma, {rvgl_ib{ib_va + 64, 0x400000, 0}}) == -EINVAL);  // 2^20 dwords: one too many
  CHECK(sub(compute, {rvgl_ib{ib_va, 0x400000, 0}}) == -EINVAL);
  CHECK(sub(sdma, std::vector<rvgl_ib>(50, at64)) == -EINVAL);
  CHECK(h.queue_state(sdma).last_submitted_seq == 0);

  // 49 IBs, each the same 32-byte aligned write: exactly that write, 49 times, one job.
  CHECK(sub(sdma, std::vector<rvgl_ib>(49, at64)) == 0);
  REQUIRE(h.fence(1, 1) == 0);
  REQUIRE(h.wait_fence(1, 1));
  CHECK(buf.ptr<uint32_t>()[0] == 0x5d3a0001u);
  CHECK(h.queue_state(sdma).state == RVGL_QUEUE_STATE_OK);
  CHECK(h.queue_state(sdma).last_submitted_seq == 1);
  // A compute IB needs only dword alignment (the PM4 packet carries the address's low bits).
  std::vector<uint32_t> pm4;
  pk::pm4_write_data(pm4, buf_va + 4, {0xc0de0002u});
  CHECK(sub(compute, {ContextHarness::write_ib(ib, ib_va, pm4, 4096 + 4)}) == 0);
  REQUIRE(h.fence(2, 1) == 0);
  REQUIRE(h.wait_fence(2, 1));
  CHECK(buf.ptr<uint32_t>()[1] == 0xc0de0002u);
}
