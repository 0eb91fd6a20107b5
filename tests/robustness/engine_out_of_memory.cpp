// The completion engine's thread meeting allocations that fail: it goes on (docs/threads.md:
// an out-of-memory pass is run again a millisecond later), and no completion it took from the
// kernel is lost on the way or reported twice. Every fence retires once, in order; a faulting job
// gives its two events once, and no event is invented.
#include <catch2/catch.hpp>

#include <poll.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "robustness/alloc_failure.h"
#include "robustness/robust_support.h"
#include "support/scoped_knob.h"

using namespace rvgl;
using namespace rvgl::test;
namespace pk = rvgl::packets;

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint32_t kRings[] = {1, 3, 5};  // compute queues, one per ring
constexpr uint32_t kBadRing = 7;          // and one whose job faults

// A context with three compute queues writing into one buffer.
struct EngineGuest {
  ContextHarness h;
  ContextHarness::HostBuffer data, ib;
  std::vector<uint32_t> queues;
  uint64_t va = 0;
  uint32_t ib_off = 0;
  bool async;
  explicit EngineGuest(bool async_fences) : h(test_config(), async_fences, 1), async(async_fences) {
    h.create_shmem();
    va = h.capset().va_start;
    data = h.mapped_bo(16 * kPage);
    ib = h.mapped_bo(64 * kPage);
    REQUIRE(h.va_map(data.bo, 0, 0, va, 16 * kPage) == 0);
    REQUIRE(h.va_map(ib.bo, 0, 0, va + (1 << 24), 64 * kPage) == 0);
    for (uint32_t ring : kRings) {
      int32_t r;
      queues.push_back(h.queue_create(RVGL_IP_COMPUTE, ring, &r));
      REQUIRE(r == 0);
    }
  }
  // Poll mode: hands on what woke the poll fd, as a VMM's loop does.
  void pump() {
    if (async) return;
    pollfd p{h.ctx().poll_fd(), POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) h.ctx().poll();
  }
  // A PM4 write of `value` at GPU VA `dst`, on the queue with handle `queue`.
  void write(uint32_t queue, uint64_t dst, uint32_t value) {
    std::vector<uint32_t> dw;
    pk::pm4_write_data(dw, dst, {value});
    ib_off = (ib_off + 256) % (64 * kPage);
    int32_t r;
    h.submit(queue, {ContextHarness::write_ib(ib, va + (1 << 24), dw, ib_off)}, {}, &r);
    REQUIRE(r == 0);
  }
};

// 60 jobs over three rings, a fence after each, while the engine thread's nth allocation fails,
// or (from_then_on) every one from the nth on: the engine can deliver nothing then, so it is let
// go after 20 ms of that. Then each fence must arrive within its deadline, once, in order, with
// the right data and no event. Returns the allocations the engine made meanwhile.
uint64_t run(bool async, uint64_t nth, bool from_then_on) {
  INFO((async ? "async callbacks" : "poll mode")
       << ", allocation " << nth << (from_then_on ? " on" : "") << " fails");
  EngineGuest g(async);
  constexpr uint32_t kJobs = 60;
  alloc::RefusedOnThread refusing("rvgl-completion", nth, from_then_on);
  for (uint32_t i = 0; i < kJobs; ++i) {
    const size_t q = i % 3;
    g.write(g.queues[q], g.va + i * 4, 0x1000 + i);
    REQUIRE(g.h.fence(kRings[q], i + 1) == 0);
  }
  alloc::Tally tally;
  if (from_then_on) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    tally = refusing.stop();
  }
  for (uint32_t i = 0; i < kJobs; ++i) {
    INFO("ring " << kRings[i % 3] << ", fence " << i + 1);
    REQUIRE(g.h.wait_fence(kRings[i % 3], i + 1, 10000));
  }
  // Last, a job that faults on a fourth queue (RVGL_EMU_VM_FAULT_STOP=2: the fault fails it,
  // the GPU reset its timeout handler does ends it): one VM_FAULT and one guilty QUEUE_RESET,
  // that queue lost and no other, each other queue told of the reset, innocent, once.
  int32_t r;
  const uint32_t bad = g.h.queue_create(RVGL_IP_COMPUTE, kBadRing, &r);
  REQUIRE(r == 0);
  g.write(bad, g.va + (64u << 20), 1);  // nothing is mapped there
  REQUIRE(g.h.fence(kBadRing, 1) == 0);
  REQUIRE(g.h.wait_fence(kBadRing, 1, 10000));
  REQUIRE(wait_for([&] {
    g.pump();
    return g.h.ctx().health().settled();
  }));
  if (!from_then_on) tally = refusing.stop();
  const auto events = read_events(g.h);
  uint32_t vm_faults = 0, guilty = 0, other = 0;
  std::map<uint32_t, uint32_t> innocent;  // by queue
  for (const auto &e : events) {
    if (e.type == RVGL_EVENT_VM_FAULT && e.queue == bad)
      ++vm_faults;
    else if (e.type == RVGL_EVENT_QUEUE_RESET && e.queue == bad &&
             (e.payload[0] & RVGL_EVENT_RESET_GUILTY))
      ++guilty;
    else if (e.type == RVGL_EVENT_QUEUE_RESET && e.payload[0] == RVGL_EVENT_RESET_INNOCENT)
      ++innocent[e.queue];
    else
      ++other;
  }
  std::string seen;
  for (const auto &e : events)
    seen += "{type " + std::to_string(e.type) + " queue " + std::to_string(e.queue) + " payload " +
            std::to_string(e.payload[0]) + "} ";
  INFO("events: " << seen << "(bad queue " << bad << ")");
  CHECK(vm_faults == 1);
  CHECK(guilty == 1);
  CHECK(other == 0);
  CHECK(innocent ==
        std::map<uint32_t, uint32_t>{{g.queues[0], 1}, {g.queues[1], 1}, {g.queues[2], 1}});
  CHECK(g.h.queue_state(bad).state == RVGL_QUEUE_STATE_LOST);
  CHECK(tally.failed == (tally.counted >= nth ? (from_then_on ? tally.counted - nth + 1 : 1) : 0));
  std::map<uint32_t, std::vector<uint64_t>> per_ring;
  for (const auto &f : g.h.fences().snapshot())
    per_ring[f.ring].push_back(f.id);
  for (size_t q = 0; q < 3; ++q) {
    std::vector<uint64_t> want;
    for (uint32_t i = static_cast<uint32_t>(q); i < kJobs; i += 3)
      want.push_back(i + 1);
    CHECK(per_ring[kRings[q]] == want);
  }
  CHECK(per_ring.size() == 4);
  for (uint32_t i = 0; i < kJobs; ++i)
    CHECK(g.data.ptr<uint32_t>()[i] == 0x1000 + i);
  CHECK(g.h.shmem_header().event_overflow == 0);
  for (uint32_t q : g.queues) {
    const auto st = g.h.queue_state(q);
    CHECK(st.state == RVGL_QUEUE_STATE_OK);
    CHECK(st.error == 0);
    CHECK(st.last_completed_seq == st.last_submitted_seq);
  }
  return tally.counted;
}

// The kernel's default fault mode (vm_fault_stop=0): a context's first job faults and still runs
// to its end, so its fences go first and its check runs after them, on the engine's thread, while
// that thread's nth allocation fails. The fault cache is all that knows of the fault, and no other
// completion or earlier check will bring another look: the refused check must come again by
// itself. Returns the allocations the engine made meanwhile.
uint64_t run_quiet_fault(bool async, uint64_t nth) {
  INFO((async ? "async callbacks" : "poll mode") << ", allocation " << nth << " fails");
  EngineGuest g(async);
  alloc::RefusedOnThread refusing("rvgl-completion", nth, false);
  const uint64_t bad_va = g.va + (64u << 20);  // nothing is mapped there
  g.write(g.queues[0], bad_va, 1);
  REQUIRE(g.h.fence(kRings[0], 1) == 0);
  REQUIRE(g.h.wait_fence(kRings[0], 1, 10000));
  // Well past the health interval, far short of what nothing but a new completion would end.
  const bool classified = wait_for(
      [&] {
        g.pump();
        return g.h.ctx().health().settled() &&
               (g.h.queue_state(g.queues[0]).flags & RVGL_QUEUE_FLAG_VM_FAULT);
      },
      2000);
  const alloc::Tally tally = refusing.stop();
  CHECK(classified);
  const auto events = read_events(g.h);
  REQUIRE(events.size() == 1);
  CHECK(events[0].type == RVGL_EVENT_VM_FAULT);
  CHECK(events[0].queue == g.queues[0]);
  CHECK((events[0].payload[0] & ~0xfffull) == (bad_va & ~0xfffull));
  const auto st = g.h.queue_state(g.queues[0]);
  CHECK(st.state == RVGL_QUEUE_STATE_OK);
  CHECK(st.flags == RVGL_QUEUE_FLAG_VM_FAULT);
  CHECK(tally.failed == (tally.counted >= nth ? 1 : 0));
  return tally.counted;
}

}  // namespace

TEST_CASE(
    "a fault only the fault cache knows is posted though the check after its job ran out of "
    "memory",
    "[alloc][engine]") {
  ScopedKnob mode("RVGL_EMU_VM_FAULT_STOP", "0");
  REQUIRE(mode.ok());
  for (bool async : {true, false}) {
    uint64_t refused_runs = 0;
    for (uint64_t nth = 1; nth <= 64; ++nth) {
      if (run_quiet_fault(async, nth) < nth) break;
      ++refused_runs;
    }
    CHECK(refused_runs > 0);  // otherwise the sweep proved nothing
  }
}

TEST_CASE("the completion engine out of memory loses no completion and invents none",
          "[alloc][engine]") {
  // Each of the engine's allocations in turn (which ones it makes follows the host's timing:
  // positions are swept until a run makes fewer), then all of them for a while; each run starts
  // a new engine (the process has no other context then), whose lists grow from nothing.
  for (bool async : {true, false}) {
    uint64_t refused_runs = 0;
    for (uint64_t nth = 1; nth <= 64; ++nth) {
      if (run(async, nth, false) < nth) break;
      ++refused_runs;
    }
    CHECK(refused_runs > 0);  // otherwise the sweep proved nothing
    uint64_t made = 0;
    for (int round = 0; round < 20; ++round)
      made += run(async, 1, true);
    CHECK(made > 0);
  }
}
