// QUEUE_DESTROY of a queue with jobs queued in its kernel context. The kernel frees a context only
// once its queued jobs have gone to the ring, holding the file's context lock meanwhile
// (amdgpu_ctx_free() -> drm_sched_entity_flush(), no timeout; the emulator does the same,
// tests/emu/test_kernel_faithful.cpp "[block]"). A destroy must not wait there: the VMM's thread
// would stall behind the guest's slowest job, and the completion engine behind the file's lock.
#include <catch2/catch.hpp>

#include <fcntl.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "../tools/common/amd_packets.h"
#include "rvgl_emu.h"
#include "support/context_harness.h"
#include "support/gate_watchdog.h"
#include "support/scoped_knob.h"
#include "support/wait_for.h"

using namespace rvgl;
using namespace rvgl::test;

namespace {

constexpr uint32_t kRing = 1;
constexpr uint32_t kJobs = 6;             // job 1 waits at the gate, 2..6 queue behind it
constexpr uint64_t kGate = 60 * 1024;     // the gate word, in the buffer
constexpr uint64_t kMarkers = 56 * 1024;  // job k writes k at kMarkers + 4 * k
constexpr uint64_t kIbs = 4096;           // job k's IB at kIbs + 256 * k

uint64_t file_contexts(int fd) {
  rvgl_emu_file_counters fc{};
  REQUIRE(rvgl_emu_get_file_counters(fd, &fc, sizeof(fc)) == 0);
  return fc.contexts;
}

}  // namespace

TEST_CASE(
    "QUEUE_DESTROY does not wait for queued jobs; their kernel context goes once they are done",
    "[context][queue]") {
  ScopedKnob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "30000", "2000");
  REQUIRE(lockup.ok());
  const bool async = GENERATE(false, true);
  const bool fenced = GENERATE(false, true);  // a fence waits for the last job, or none does
  UniqueFd node(::open("/dev/dri/renderD128", O_RDWR | O_CLOEXEC));
  REQUIRE(node);
  // The VMM hands the file over whole: the context's own from here on, peeked at by its number.
  const int file = node.get();
  ContextHarness h(test_config(), async, 1, std::move(node));
  h.create_shmem();
  const uint64_t va = h.capset().va_start;
  auto buf = h.mapped_bo(64 * 1024);
  REQUIRE(h.va_map(buf.bo, 0, 0, va, 64 * 1024) == 0);
  const uint64_t base = file_contexts(file);
  uint32_t *words = buf.ptr<uint32_t>();
  auto marker = [&](uint32_t k) {
    return __atomic_load_n(words + (kMarkers + 4 * k) / 4, __ATOMIC_ACQUIRE);
  };

  for (uint64_t round = 1; round <= 5; ++round) {
    INFO("round " << round);
    for (uint32_t k = 1; k <= kJobs; ++k)
      words[(kMarkers + 4 * k) / 4] = 0;
    words[kGate / 4] = 0;
    int32_t r;
    const uint32_t q = h.queue_create(RVGL_IP_SDMA, kRing, &r);
    REQUIRE(r == 0);
    REQUIRE(file_contexts(file) == base + 1);
    GateWatchdog gate(words + kGate / 4);
    for (uint32_t k = 1; k <= kJobs; ++k) {
      std::vector<uint32_t> ib;
      if (k == 1) packets::sdma_poll_mem_equal(ib, va + kGate, 1, 0xffffffffu);
      packets::sdma_write_linear(ib, va + kMarkers + 4 * k, {k});
      packets::sdma_pad(ib);
      REQUIRE(h.submit(q, {ContextHarness::write_ib(buf, va, ib, kIbs + 256 * k)}, {}, &r) == k);
      REQUIRE(r == 0);
    }
    if (fenced) REQUIRE(h.fence(kRing, round) == 0);

    REQUIRE(h.queue_destroy(q) == 0);
    // Returned with the gate still closed: nothing ran, and the kernel context is still there.
    CHECK(__atomic_load_n(words + kGate / 4, __ATOMIC_ACQUIRE) == 0);
    CHECK(marker(1) == 0);
    CHECK(file_contexts(file) == base + 1);
    // A new queue on the same ring meanwhile: the destroyed one counts (the default quota has
    // room), and its jobs are not the new queue's.
    const uint32_t q2 = h.queue_create(RVGL_IP_SDMA, kRing, &r);
    REQUIRE(r == 0);
    CHECK(file_contexts(file) == base + 2);
    REQUIRE(h.queue_destroy(q2) == 0);  // nothing submitted: freed at once
    CHECK(file_contexts(file) == base + 1);

    gate.open();
    for (uint32_t k = 1; k <= kJobs; ++k)
      REQUIRE(wait_for([&] { return marker(k) == k; }));
    if (fenced) REQUIRE(h.wait_fence(kRing, round));
    // Let go at the VMM's next call that collects destroyed queues (a fence, a QUEUE_CREATE),
    // once the engine knows the last job done.
    uint64_t probe = 1000 * round;
    CHECK(wait_for([&] {
      REQUIRE(h.fence(kRing, ++probe) == 0);  // a free ring: retires at once
      return file_contexts(file) == base;
    }));
  }
}

TEST_CASE("a context destroy that frees a destroyed queue's kernel context stalls no other context",
          "[context][queue]") {
  // Freeing the kernel context of a destroyed queue with jobs still queued waits for them while
  // holding the file's context lock (amdgpu_ctx_free()). The destroy's VMM thread may wait
  // there; the completion engine must not, or every context's fences wait with it. A look of
  // the health owner at the destroyed context's other queues (the quiet look a check files after
  // a trusted completion) would take that lock: they must be gone from it first.
  ScopedKnob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "30000", "2000");
  REQUIRE(lockup.ok());
  auto a = std::make_unique<ContextHarness>(test_config(), true, 1);
  ContextHarness b(test_config(), true, 2);
  a->create_shmem();
  b.create_shmem();
  const uint64_t va_a = a->capset().va_start, va_b = b.capset().va_start;
  auto buf_a = a->mapped_bo(64 * 1024);
  auto buf_b = b.mapped_bo(64 * 1024);
  REQUIRE(a->va_map(buf_a.bo, 0, 0, va_a, 64 * 1024) == 0);
  REQUIRE(b.va_map(buf_b.bo, 0, 0, va_b, 64 * 1024) == 0);
  uint32_t *words = buf_a.ptr<uint32_t>();
  int32_t r;
  const uint32_t live = a->queue_create(RVGL_IP_COMPUTE, 2, &r);
  REQUIRE(r == 0);
  const uint32_t gated = a->queue_create(RVGL_IP_SDMA, kRing, &r);
  REQUIRE(r == 0);
  const uint32_t qb = b.queue_create(RVGL_IP_COMPUTE, 1, &r);
  REQUIRE(r == 0);
  // A completion on A's live queue: its check files a quiet look shortly after.
  std::vector<uint32_t> ib;
  packets::pm4_write_data(ib, va_a + 52 * 1024, {7});
  REQUIRE(a->submit(live, {ContextHarness::write_ib(buf_a, va_a, ib, 8192)}, {}, &r) == 1);
  REQUIRE(a->fence(2, 1) == 0);
  REQUIRE(a->wait_fence(2, 1));
  // Jobs held at the gate on another queue of A, which the guest destroys.
  words[kGate / 4] = 0;
  GateWatchdog gate(words + kGate / 4, std::chrono::seconds(20));
  for (uint32_t k = 1; k <= kJobs; ++k) {
    ib.clear();
    if (k == 1) packets::sdma_poll_mem_equal(ib, va_a + kGate, 1, 0xffffffffu);
    packets::sdma_write_linear(ib, va_a + kMarkers + 4 * k, {k});
    packets::sdma_pad(ib);
    REQUIRE(a->submit(gated, {ContextHarness::write_ib(buf_a, va_a, ib, kIbs + 256 * k)}, {}, &r) ==
            k);
  }
  REQUIRE(a->queue_destroy(gated) == 0);
  // The VMM destroys A on a thread of its own; it may wait for the gate.
  std::thread destroy([&] { a.reset(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // B's fence is delivered while A's queued jobs still wait at the gate.
  ib.clear();
  packets::pm4_write_data(ib, va_b + 56 * 1024, {9});
  REQUIRE(b.submit(qb, {ContextHarness::write_ib(buf_b, va_b, ib, 4096)}, {}, &r) == 1);
  REQUIRE(b.fence(1, 77) == 0);
  CHECK(b.wait_fence(1, 77, 8000));
  CHECK(__atomic_load_n(words + kGate / 4, __ATOMIC_ACQUIRE) == 0);
  gate.open();
  destroy.join();
}
