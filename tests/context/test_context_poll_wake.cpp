// What a completion costs the completion engine (docs/threads.md, "Poll mode without a hop"):
// with SYNCOBJ_EVENTFD, one registration per completed point, of the poll-mode VMM's own fd
// (the kernel wakes its thread and nobody else's) or, with async callbacks, of the engine's
// eventfd. Counted exactly over a run of jobs one at a time.
#include <catch2/catch.hpp>

#include <poll.h>

#include <chrono>
#include <thread>

#include "../tools/common/amd_packets.h"
#include "rvgl_emu.h"
#include "support/context_harness.h"
#include "support/scoped_knob.h"

using namespace rvgl;
using namespace rvgl::test;
namespace pk = rvgl::packets;

namespace {

constexpr uint32_t kRing = 5;
constexpr uint32_t kJobs = 40;

// Waits (bounded) until `done` holds; registrations are made on whichever thread saw the point,
// so the last one may land just after the fence was delivered.
template <class F>
void settle(F done) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!done() && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// One compute queue on kRing and the buffers its jobs use: each job writes one word. The
// harness's shared page must exist first (its members are made before the constructor runs).
struct OneQueue {
  explicit OneQueue(ContextHarness &harness) : h(harness) {
    REQUIRE(h.va_map(buf.bo, 0, 0, va0, 64 * 1024) == 0);
    REQUIRE(h.va_map(ib.bo, 0, 0, va0 + 1024 * 1024, 64 * 1024) == 0);
  }
  void create() {
    int32_t r;
    q = h.queue_create(RVGL_IP_COMPUTE, kRing, &r);
    REQUIRE(r == 0);
  }
  // Job `i` (it writes i + 1), its fence `id`, and the wait for that fence.
  void run_job(uint32_t i, uint64_t id) {
    std::vector<uint32_t> dw;
    pk::pm4_write_data(dw, va0, {i + 1});
    int32_t r;
    h.submit(q, {ContextHarness::write_ib(ib, va0 + 1024 * 1024, dw)}, {}, &r);
    REQUIRE(r == 0);
    REQUIRE(h.fence(kRing, id) == 0);
    REQUIRE(h.wait_fence(kRing, id));
    CHECK(buf.ptr<uint32_t>()[0] == i + 1);
  }

  ContextHarness &h;
  const uint64_t va0 = h.capset().va_start;
  ContextHarness::HostBuffer buf = h.mapped_bo(64 * 1024);
  ContextHarness::HostBuffer ib = h.mapped_bo(64 * 1024);
  uint32_t q = 0;
};

// kJobs jobs on one queue, each waited for before the next; the registrations made meanwhile.
// `expected`: the registrations the run makes in all (the last may land after its fence).
CompletionEngine::Registrations run_one_at_a_time(ContextHarness &h, uint32_t expected = kJobs) {
  // Each job takes 20 ms, so its fence is created before it completes. With async callbacks a
  // job the GPU finished first is delivered inside create_fence (its user fence), and the engine
  // may then cover two points with one registration: fewer than one per completion, by timing.
  ScopedKnob slow("RVGL_EMU_JOB_LATENCY_US", "20000");
  REQUIRE(slow.ok());
  h.create_shmem();
  OneQueue one(h);
  const CompletionEngine &engine = h.ctx().completion_engine();
  const auto start = engine.registrations();
  one.create();
  if (!engine.uses_eventfd()) return {};
  // The new watch's first registration (its next point, before anything is submitted).
  settle([&] {
    const auto now = engine.registrations();
    return now.own + now.direct > start.own + start.direct;
  });
  const auto before = engine.registrations();
  REQUIRE(before.own + before.direct == start.own + start.direct + 1);
  for (uint32_t i = 0; i < kJobs; ++i)
    one.run_job(i, 100 + i);
  settle([&] {
    const auto now = engine.registrations();
    return now.own + now.direct >= before.own + before.direct + expected;
  });
  const auto after = engine.registrations();
  return {after.own - before.own, after.direct - before.direct};
}

}  // namespace

TEST_CASE("poll mode: each completion registers the VMM's fd once, never the engine's",
          "[context][poll-wake]") {
  ContextHarness h(test_config(), /*async=*/false);
  const auto made = run_one_at_a_time(h);
  if (!h.ctx().completion_engine().uses_eventfd()) {
    CHECK(made.own == 0);  // the one-wait engine registers nothing
    CHECK(made.direct == 0);
    return;
  }
  CHECK(made.direct == kJobs);
  CHECK(made.own == 0);
}

TEST_CASE("async callbacks: each completion registers the engine's eventfd once",
          "[context][poll-wake]") {
  ContextHarness h(test_config(), /*async=*/true);
  const auto made = run_one_at_a_time(h);
  CHECK(made.own == (h.ctx().completion_engine().uses_eventfd() ? kJobs : 0));
  CHECK(made.direct == 0);
}

TEST_CASE("poll mode: a failed timeline query leaves the completion to the engine",
          "[context][poll-wake]") {
  ContextHarness h(test_config(), /*async=*/false);
  h.create_shmem();
  OneQueue one(h);
  // A queue without a user fence page (the kernel refused the object: the queue works without
  // one), so the VMM's thread must ask the timeline about each delegated point.
  rvgl_emu_reset_fault_injection();
  REQUIRE(rvgl_emu_set_knob("RVGL_EMU_FAIL", "GEM_CREATE:1:ENOMEM") == 0);
  one.create();
  rvgl_emu_reset_fault_injection();
  const CompletionEngine &engine = h.ctx().completion_engine();
  for (uint32_t i = 0; i < 8; ++i) {
    // The VMM thread's query is the only SYNCOBJ_QUERY of this run (the engine's checks use
    // WAIT_FENCES, WAIT_CS and CTX): it fails, and the fence must still arrive.
    rvgl_emu_reset_fault_injection();
    REQUIRE(rvgl_emu_set_knob("RVGL_EMU_FAIL", "SYNCOBJ_QUERY:1:EIO") == 0);
    const auto own_before = engine.registrations().own;
    one.run_job(i, 500 + i);
    if (engine.uses_eventfd()) CHECK(engine.registrations().own == own_before + 1);
  }
  rvgl_emu_reset_fault_injection();
}

TEST_CASE("poll mode: a completion whose check is due waits for the kernel's word on it",
          "[context][poll-wake]") {
  ContextHarness h(test_config(), /*async=*/false);
  if (!h.ctx().completion_engine().uses_eventfd()) return;  // nothing is delegated
  // Jobs 20 ms apart: every completion finds the health owner's check due, and the engine runs
  // that check at once. The user fence shows the job done before the kernel's interrupt handler
  // has recorded its faults, so the point goes to the engine only once the timeline (a query)
  // says the kernel signalled it (tests/robustness/test_late_interrupt.cpp). With every query
  // failing, each completion goes back to the engine's own eventfd, which the kernel signals at
  // once for a reached point: one registration of each kind per job, and every fence arrives.
  rvgl_emu_reset_fault_injection();
  REQUIRE(rvgl_emu_set_knob("RVGL_EMU_FAIL", "SYNCOBJ_QUERY:1+:EIO") == 0);
  const auto made = run_one_at_a_time(h, 2 * kJobs);
  rvgl_emu_reset_fault_injection();
  CHECK(made.direct == kJobs);
  CHECK(made.own == kJobs);
}

TEST_CASE("poll mode: a signalled job that ran to its end goes out in the poll that saw it",
          "[context][poll-wake]") {
  // Every job finds the health owner's check due (the last one is more than an interval old).
  // Its job wrote its user fence (no error of its own) and the kernel signalled it (the poll fd
  // is readable), so nothing the check can find must come before its fence: the one poll() that
  // saw it delivers it, and the check follows on the engine, exactly once per job. Before, the
  // point went to the engine to be classified and came back through the poll fd: two hand-offs
  // between threads on the fence's way, each one a wakeup a busy host may be slow to give.
  ContextHarness h(test_config(), /*async=*/false);
  if (!h.ctx().completion_engine().uses_eventfd()) return;  // nothing is delegated
  h.create_shmem();
  OneQueue one(h);
  one.create();
  const QueueHealth &health = h.ctx().health();
  for (uint32_t i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    // The previous job's check, on the engine, ends with a look for fences made ready
    // (FenceDelivery::progress()); when it found that job's fence before this thread's poll()
    // took it, its signal of the poll fd outlives the fence: a spurious wakeup, which a VMM's
    // next poll() answers with nothing (poll() looks again after its drain, so none is lost).
    // Consumed here, so the readiness waited for below is this job's.
    pollfd stale{h.ctx().poll_fd(), POLLIN, 0};
    if (::poll(&stale, 1, 0) == 1) {
      const size_t delivered = h.fences().size();
      h.ctx().poll();
      CHECK(h.fences().size() == delivered);
    }
    const uint64_t checks = health.checks();
    std::vector<uint32_t> dw;
    pk::pm4_write_data(dw, one.va0, {i + 1});
    int32_t r;
    h.submit(one.q, {ContextHarness::write_ib(one.ib, one.va0 + 1024 * 1024, dw)}, {}, &r);
    REQUIRE(r == 0);
    REQUIRE(h.fence(kRing, 700 + i) == 0);
    pollfd p{h.ctx().poll_fd(), POLLIN, 0};
    REQUIRE(::poll(&p, 1, 5000) == 1);  // the kernel signalled the job's point
    h.ctx().poll();
    CHECK(h.fences().has(kRing, 700 + i));
    settle([&] { return health.checks() > checks; });
    CHECK(health.checks() == checks + 1);
  }
}
