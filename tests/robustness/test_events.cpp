// Issue 7: faults, hangs and resets reach the guest as events; other queues and contexts go on.
#include <catch2/catch.hpp>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "robustness/robust_support.h"

using namespace rvgl;
using namespace rvgl::test;
namespace pk = rvgl::packets;

namespace {

constexpr uint64_t kPage = 4096;

const char *mode_name(bool async) {
  return async ? "async" : "poll mode";
}

// A context with a mapped data buffer at va_start, an IB buffer above it and one queue per IP
// (none with `queues` false: a scenario of its own queues only, where a GPU reset one of them
// causes is told to no other queue).
struct Guest {
  ContextHarness h;
  bool async;
  ContextHarness::HostBuffer data, ib;
  uint32_t compute = 0, sdma = 0;
  uint64_t va = 0;
  uint32_t ib_off = 0;
  uint64_t next_fence = 1000;  // fence ids the helpers below use, above the test cases' own
  explicit Guest(uint32_t ctx_id, bool async_fences = true, bool queues = true)
      : h(test_config(), async_fences, ctx_id), async(async_fences) {
    h.create_shmem();
    va = h.capset().va_start;
    data = h.mapped_bo(64 * kPage);
    ib = h.mapped_bo(64 * kPage);
    REQUIRE(h.va_map(data.bo, 0, 0, va, 64 * kPage) == 0);
    REQUIRE(h.va_map(ib.bo, 0, 0, va + (1 << 24), 64 * kPage) == 0);
    if (!queues) return;
    int32_t r;
    compute = h.queue_create(RVGL_IP_COMPUTE, 1, &r);
    REQUIRE(r == 0);
    sdma = h.queue_create(RVGL_IP_SDMA, 2, &r);
    REQUIRE(r == 0);
  }
  // A PM4 write of `value` at GPU VA `dst` on the compute queue; returns the submit result.
  int32_t write(uint64_t dst, uint32_t value, uint32_t queue = 0) {
    std::vector<uint32_t> dw;
    pk::pm4_write_data(dw, dst, {value});
    int32_t r;
    ib_off = (ib_off + 256) % (64 * kPage);
    h.submit(queue ? queue : compute, {ContextHarness::write_ib(ib, va + (1 << 24), dw, ib_off)},
             {}, &r);
    return r;
  }
  // Poll mode: hands on what woke the poll fd, as a VMM's loop does (docs/threads.md "Poll mode
  // without a hop": the kernel wakes the VMM's thread in place of the engine, which hears of such
  // a completion, a failed job's included, only through poll()).
  void pump() {
    if (async) return;
    pollfd p{h.ctx().poll_fd(), POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) h.ctx().poll();
  }
  // A fence on `ring` for all the work submitted there so far, delivered.
  bool fenced(uint32_t ring) {
    const uint64_t id = next_fence++;
    return h.fence(ring, id) == 0 && h.wait_fence(ring, id);
  }
  const rvgl_shmem_header &header() const { return h.shmem_header(); }
};

struct EventCounts {
  uint32_t vm_fault = 0, reset_guilty = 0, reset_other = 0, hang = 0, other = 0;
};

EventCounts count(const std::vector<rvgl_event> &ev) {
  EventCounts c;
  for (const auto &e : ev) {
    switch (e.type) {
      case RVGL_EVENT_VM_FAULT:
        ++c.vm_fault;
        break;
      case RVGL_EVENT_QUEUE_RESET:
        ++((e.payload[0] & RVGL_EVENT_RESET_GUILTY) ? c.reset_guilty : c.reset_other);
        break;
      case RVGL_EVENT_QUEUE_HANG:
        ++c.hang;
        break;
      default:
        ++c.other;
    }
  }
  return c;
}

// The records as a failed check shows them: type, queue and first payload word of each.
std::string describe(const std::vector<rvgl_event> &ev) {
  std::string s;
  for (const auto &e : ev)
    s += "{type " + std::to_string(e.type) + " queue " + std::to_string(e.queue) + " payload " +
         std::to_string(e.payload[0]) + "} ";
  return s.empty() ? "none" : s;
}

// One record as "type queue payload[0]", and the records from the `from`th on in that form,
// sorted: records one check posts for several queues, whose order is the check's.
std::string record(uint32_t type, uint32_t queue, uint64_t payload0) {
  return std::to_string(type) + " " + std::to_string(queue) + " " + std::to_string(payload0);
}
std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}
std::vector<std::string> sorted_records(const std::vector<rvgl_event> &ev, size_t from) {
  std::vector<std::string> out;
  for (size_t i = from; i < ev.size(); ++i)
    out.push_back(record(ev[i].type, ev[i].queue, ev[i].payload[0]));
  return sorted(std::move(out));
}

// Polls finer than wait_for(): the scenario below waits 80 times per run.
bool until(const std::function<bool()> &cond) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

// The same, handing on the guest's poll-mode wakeups meanwhile.
bool until(Guest &g, const std::function<bool()> &cond) {
  return until([&] {
    g.pump();
    return cond();
  });
}

// When the context's health owner next looks (QueueHealth::deadline_ns(), the engine's view of
// it): 0 while nothing is scheduled — no deferred check, no reset follow-up, no quiet look. The
// object is not const; only ComputeContext's accessor is.
int64_t health_deadline(Guest &g) {
  return const_cast<QueueHealth &>(g.h.ctx().health()).deadline_ns();
}

// Runs one job on compute queue `queue` (on `ring`) that writes `value` at `dst`, waits for its
// fence, then until the health owner has looked at that work and has nothing left scheduled:
// every record the context's work will ever give is in the ring then, and a completion after the
// scenario's took nothing of it (a fault, a reset). The health owner's own state says when:
// - a completion is marked for it before its fence can be delivered, with no check under way
//   (completed() runs on the engine's thread, which runs every check; completed_later() holds
//   the check lock), so the check that classifies the job starts after the mark and ends after
//   `before` below, which is read before the job exists;
// - a check files what follows it (a quiet look, a reset's follow-up looks, the queues a reset
//   marks) before it is counted, and a look so filed keeps the deadline set while it runs;
// - waiting first for nothing to be scheduled keeps a look the scenario left (a quiet look that
//   ends after `before`) from passing for this job's check.
// Costs up to two quiet looks (QueueHealth::kQuietLookNs, 50 ms each).
void settle(Guest &g, uint32_t queue, uint32_t ring, uint64_t dst, uint32_t value) {
  REQUIRE(until(g, [&] { return health_deadline(g) == 0; }));
  const uint64_t before = g.h.ctx().health().checks();
  REQUIRE(g.write(dst, value, queue) == 0);
  REQUIRE(g.fenced(ring));
  REQUIRE(
      until(g, [&] { return g.h.ctx().health().checks() > before && health_deadline(g) == 0; }));
}

}  // namespace

TEST_CASE(
    "a GPU VM fault reaches the guilty guest; an innocent one keeps working, 10 times each mode",
    "[robust][events]") {
  for (const bool async : {true, false}) {
    for (uint32_t run = 0; run < 10; ++run) {
      INFO(mode_name(async) << ", run " << run);
      Guest bad(20000 + 100 * async + run, async), good(20200 + 100 * async + run, async);
      const uint64_t hole = bad.va + (1ull << 30);  // mapped nowhere
      REQUIRE(bad.write(hole + 0x40, 1) == 0);
      // Lost is published after its records: they are in the ring now.
      REQUIRE(until(bad,
                    [&] { return bad.h.queue_state(bad.compute).state == RVGL_QUEUE_STATE_LOST; }));
      const auto st = bad.h.queue_state(bad.compute);
      REQUIRE(st.flags == (RVGL_QUEUE_FLAG_GUILTY | RVGL_QUEUE_FLAG_VM_FAULT));
      REQUIRE(st.error == -ETIME);
      REQUIRE(bad.write(bad.va, 2) == -ECANCELED);
      // A queue that completes work after the fault takes nothing of it; then nothing more comes.
      int32_t r;
      const uint32_t next = bad.h.queue_create(RVGL_IP_COMPUTE, 3, &r);
      REQUIRE(r == 0);
      settle(bad, next, 3, bad.va + 8, 3);
      REQUIRE(bad.data.ptr<uint32_t>()[2] == 3);
      REQUIRE(bad.header().event_overflow == 0);
      // The halted job ends with the GPU reset its timeout handler does (emu/README.md), which
      // every queue that was there hears of: the context's idle SDMA queue innocent, once.
      REQUIRE(bad.header().event_wptr == 3);
      const auto ev = read_events(bad.h);
      INFO("events: " << describe(ev));
      REQUIRE(ev.size() == 3);
      REQUIRE(ev[0].seq == 1);
      REQUIRE(ev[0].type == RVGL_EVENT_VM_FAULT);
      REQUIRE(ev[0].queue == bad.compute);
      REQUIRE((ev[0].payload[0] & ~0xfffull) == ((hole + 0x40) & ~0xfffull));
      REQUIRE((ev[0].payload[1] & 0xffffffffu) != 0);  // status
      REQUIRE(sorted_records(ev, 1) ==
              sorted({record(RVGL_EVENT_QUEUE_RESET, bad.compute, RVGL_EVENT_RESET_GUILTY),
                      record(RVGL_EVENT_QUEUE_RESET, bad.sdma, RVGL_EVENT_RESET_INNOCENT)}));
      REQUIRE(bad.h.queue_state(bad.sdma).state == RVGL_QUEUE_STATE_OK);
      REQUIRE(bad.h.queue_state(bad.sdma).flags == RVGL_QUEUE_FLAG_INNOCENT);
      // Nothing for the queue made after it, which worked.
      REQUIRE(bad.h.queue_state(next).state == RVGL_QUEUE_STATE_OK);
      REQUIRE(bad.h.queue_state(next).flags == 0);

      // The innocent context works; it hears of the reset, innocent, for each of its queues.
      settle(good, good.compute, 1, good.va, 0xabc);
      REQUIRE(good.data.ptr<uint32_t>()[0] == 0xabc);
      REQUIRE(until(good, [&] {
        return good.h.queue_state(good.sdma).flags == RVGL_QUEUE_FLAG_INNOCENT &&
               health_deadline(good) == 0;
      }));
      const auto gev = read_events(good.h);
      INFO("good's events: " << describe(gev));
      REQUIRE(good.header().event_wptr == 2);
      REQUIRE(sorted_records(gev, 0) ==
              sorted({record(RVGL_EVENT_QUEUE_RESET, good.compute, RVGL_EVENT_RESET_INNOCENT),
                      record(RVGL_EVENT_QUEUE_RESET, good.sdma, RVGL_EVENT_RESET_INNOCENT)}));
      for (const uint32_t q : {good.compute, good.sdma}) {
        const auto gs = good.h.queue_state(q);
        REQUIRE(gs.state == RVGL_QUEUE_STATE_OK);
        REQUIRE(gs.flags == RVGL_QUEUE_FLAG_INNOCENT);
      }
    }
  }
}

TEST_CASE("a GPU reset with VRAM lost reaches innocent queues and the device, 10 times each mode",
          "[robust][events]") {
  for (const bool async : {true, false}) {
    for (uint32_t run = 0; run < 10; ++run) {
      INFO(mode_name(async) << ", run " << run);
      ScopedKnob vram("RVGL_EMU_RESET_VRAM_LOST", "1");
      ScopedKnob reset("RVGL_EMU_RESET_JOB", "1");  // every kernel context's 1st job
      REQUIRE(vram.ok());
      REQUIRE(reset.ok());
      Guest g(22000 + 100 * async + run, async);
      REQUIRE(g.write(g.va, 1) == 0);  // lost to a GPU reset another engine's hang caused
      REQUIRE(g.fenced(1));
      // Both queues lost, the idle SDMA queue too (its context predates the VRAM loss); each is
      // published after its records, and DEVICE_RESET is posted before the first of them.
      REQUIRE(until(g, [&] {
        return g.h.queue_state(g.compute).state == RVGL_QUEUE_STATE_LOST &&
               g.h.queue_state(g.sdma).state == RVGL_QUEUE_STATE_LOST;
      }));
      for (const uint32_t q : {g.compute, g.sdma}) {
        const auto st = g.h.queue_state(q);
        REQUIRE(st.flags == (RVGL_QUEUE_FLAG_INNOCENT | RVGL_QUEUE_FLAG_VRAM_LOST));
        REQUIRE(st.error == -ECANCELED);
      }
      // Nothing more, also after work of a queue created since (its context has VRAM).
      REQUIRE(rvgl_emu_set_knob("RVGL_EMU_RESET_JOB", "0") == 0);
      int32_t r;
      const uint32_t next = g.h.queue_create(RVGL_IP_COMPUTE, 3, &r);
      REQUIRE(r == 0);
      settle(g, next, 3, g.va + 4, 2);
      REQUIRE(g.data.ptr<uint32_t>()[1] == 2);
      const auto st = g.h.queue_state(next);
      REQUIRE(st.state == RVGL_QUEUE_STATE_OK);
      REQUIRE(st.flags == 0);
      REQUIRE(g.header().event_overflow == 0);
      REQUIRE(g.header().event_wptr == 3);
      const auto ev = read_events(g.h);
      REQUIRE(ev.size() == 3);
      uint32_t device = 0, compute = 0, sdma = 0;
      for (const auto &e : ev) {
        if (e.type == RVGL_EVENT_DEVICE_RESET) {
          ++device;
          REQUIRE(e.queue == RVGL_EVENT_QUEUE_NONE);
          REQUIRE(e.payload[0] == RVGL_EVENT_RESET_VRAM_LOST);
          REQUIRE(e.payload[1] == 0);
          continue;
        }
        REQUIRE(e.type == RVGL_EVENT_QUEUE_RESET);
        REQUIRE(e.payload[0] == (RVGL_EVENT_RESET_INNOCENT | RVGL_EVENT_RESET_VRAM_LOST));
        REQUIRE((e.queue == g.compute || e.queue == g.sdma));
        ++(e.queue == g.compute ? compute : sdma);
      }
      REQUIRE(device == 1);
      REQUIRE(compute == 1);
      REQUIRE(sdma == 1);
    }
  }
}

TEST_CASE("each VRAM loss a context's queues see is one DEVICE_RESET, 3 losses each mode",
          "[robust][events]") {
  // A queue created after a VRAM loss has VRAM again (its kernel context's copy of the loss count
  // is current), so a later loss is news to it: each loss is its own DEVICE_RESET. Before, the
  // first one was the context's only one.
  for (const bool async : {true, false}) {
    INFO(mode_name(async));
    ScopedKnob vram("RVGL_EMU_RESET_VRAM_LOST", "1");
    ScopedKnob reset("RVGL_EMU_RESET_JOB", "1");  // every kernel context's 1st job
    REQUIRE(vram.ok());
    REQUIRE(reset.ok());
    Guest g(23000 + 100 * async, async);
    uint32_t compute = g.compute, sdma = g.sdma, ring = 1;
    for (uint32_t loss = 0; loss < 3; ++loss) {
      INFO("loss " << loss);
      REQUIRE(g.write(g.va, 1, compute) == 0);
      REQUIRE(g.fenced(ring));
      REQUIRE(until(g, [&] {
        return g.h.queue_state(compute).state == RVGL_QUEUE_STATE_LOST &&
               g.h.queue_state(sdma).state == RVGL_QUEUE_STATE_LOST;
      }));
      REQUIRE(until(g, [&] { return health_deadline(g) == 0; }));
      const auto ev = read_events(g.h);
      INFO("events: " << describe(ev));
      REQUIRE(ev.size() == 3);
      uint32_t device = 0, resets = 0;
      for (const auto &e : ev) {
        device += e.type == RVGL_EVENT_DEVICE_RESET;
        resets += e.type == RVGL_EVENT_QUEUE_RESET &&
                  e.payload[0] == (RVGL_EVENT_RESET_INNOCENT | RVGL_EVENT_RESET_VRAM_LOST) &&
                  (e.queue == compute || e.queue == sdma);
      }
      CHECK(device == 1);
      CHECK(resets == 2);
      REQUIRE(g.h.queue_destroy(compute) == 0);
      REQUIRE(g.h.queue_destroy(sdma) == 0);
      int32_t r;
      ring = 10 + loss;
      compute = g.h.queue_create(RVGL_IP_COMPUTE, ring, &r);
      REQUIRE(r == 0);
      sdma = g.h.queue_create(RVGL_IP_SDMA, 20 + loss, &r);
      REQUIRE(r == 0);
    }
    CHECK(g.header().event_overflow == 0);
  }
}

namespace {

constexpr uint32_t kFaultingQueues = 80;  // two records each (fault, reset): 160 > 128 entries
constexpr int kRuns = 100;                // in each delivery mode

// One run: kFaultingQueues queues of one context fault once each, one after the other; each is
// destroyed as soon as QUEUE_STATE says it is lost. The context has no other queue: each fault
// ends in a GPU reset (emu/README.md), which a queue made before it would hear of, innocent. drain:
// the guest consumes the ring after each queue (then nothing may overflow); else it never reads it.
void fault_queues(Guest &g, bool drain, std::vector<rvgl_event> *seen) {
  for (uint32_t i = 0; i < kFaultingQueues; ++i) {
    int32_t r;
    const uint32_t q = g.h.queue_create(RVGL_IP_COMPUTE, 10, &r);
    REQUIRE(r == 0);
    REQUIRE(g.write(g.va + (1ull << 31) + i * 0x10000, 1, q) == 0);
    REQUIRE(until(g, [&] { return g.h.queue_state(q).state == RVGL_QUEUE_STATE_LOST; }));
    // Classified from the job's own error, also when the GPU finished the job before submit()
    // recorded it.
    const auto st = g.h.queue_state(q);
    REQUIRE(st.flags == (RVGL_QUEUE_FLAG_GUILTY | RVGL_QUEUE_FLAG_VM_FAULT));
    REQUIRE(st.error == -ETIME);
    // Lost is published after its records: they are in the ring now.
    if (drain) {
      auto more = read_events(g.h);
      seen->insert(seen->end(), more.begin(), more.end());
    }
    REQUIRE(g.h.queue_destroy(q) == 0);
  }
}

}  // namespace

TEST_CASE(
    "each of 80 faulting queues gives exactly one VM_FAULT and one guilty reset, 100 times each "
    "mode",
    "[robust][events]") {
  ScopedKnob stop("RVGL_EMU_VM_FAULT_STOP", "2");  // the fault fails its job (see emu/README)
  for (const bool async : {true, false}) {
    for (int run = 0; run < kRuns; ++run) {
      INFO(mode_name(async) << ", run " << run);
      Guest g(100 + 1000 * async + run, async, /*queues=*/false);
      std::vector<rvgl_event> ev;
      fault_queues(g, /*drain=*/true, &ev);
      const EventCounts c = count(ev);
      REQUIRE(c.vm_fault == kFaultingQueues);
      REQUIRE(c.reset_guilty == kFaultingQueues);
      REQUIRE(c.hang == 0);
      REQUIRE(c.reset_other == 0);
      REQUIRE(c.other == 0);
      REQUIRE(g.header().event_overflow == 0);
      REQUIRE(g.header().event_wptr == 2 * kFaultingQueues);
      for (size_t i = 0; i < ev.size(); ++i)
        REQUIRE(ev[i].seq == i + 1);
    }
  }
}

namespace {

// A compute job that writes at a VA mapped nowhere: it faults and, with vm_fault_stop=2 and
// RVGL_EMU_FAULT_HALT_MS, stays halted. Returns that address once the fault is in the VM's cache.
uint64_t halted_fault(Guest &g) {
  const uint64_t hole = g.va + (1ull << 30);
  const uint64_t faults = emu_counters().vm_faults;
  REQUIRE(g.write(hole, 1) == 0);
  REQUIRE(until(g, [&] { return emu_counters().vm_faults == faults + 1; }));
  return hole;
}

// An SDMA write of 7 at the data buffer's second word, fenced, and looked at by a check that
// started after it was submitted.
void sdma_write_looked_at(Guest &g) {
  const uint64_t checks = g.h.ctx().health().checks();
  std::vector<uint32_t> dw;
  pk::sdma_write_linear(dw, g.va + 4, {7});
  g.ib_off = (g.ib_off + 256) % (64 * kPage);
  int32_t r;
  g.h.submit(g.sdma, {ContextHarness::write_ib(g.ib, g.va + (1 << 24), dw, g.ib_off)}, {}, &r);
  REQUIRE(r == 0);
  REQUIRE(g.fenced(2));
  REQUIRE(until(g, [&] { return g.h.ctx().health().checks() > checks; }));
  CHECK(g.data.ptr<uint32_t>()[1] == 7);
}

}  // namespace

TEST_CASE("a fault whose halted job has not failed yet is not another queue's, 5 times each mode",
          "[robust][events]") {
  // vm_fault_stop=2: the kernel halts the faulting job and it fails only when the scheduler's
  // timeout handler ends it (lockup_timeout), the fault in the VM's fault cache all that while.
  // A look at another queue that completed work meanwhile (on another engine: the halted job
  // holds its own ring) must leave the fault for the failing job's own look: taken there, it
  // named the wrong queue (or none), and the failed job became a hang.
  ScopedKnob stop("RVGL_EMU_VM_FAULT_STOP", "2");
  ScopedKnob halt("RVGL_EMU_FAULT_HALT_MS", "300", "0");
  REQUIRE(halt.ok());
  for (const bool async : {true, false}) {
    for (uint32_t run = 0; run < 5; ++run) {
      INFO(mode_name(async) << ", run " << run);
      Guest g(3300 + 100 * async + run, async);
      const uint64_t hole = halted_fault(g);
      // The faulting job is halted: an SDMA write completes and is looked at.
      sdma_write_looked_at(g);
      CHECK(g.h.queue_state(g.compute).state == RVGL_QUEUE_STATE_OK);  // not failed yet
      CHECK(g.header().event_wptr == 0);
      // Then the timeout handler fails the halted job, with the GPU reset the SDMA queue hears of
      // (innocent) in the check the reset brings after it.
      REQUIRE(until(g, [&] {
        return g.h.queue_state(g.compute).state == RVGL_QUEUE_STATE_LOST &&
               g.h.queue_state(g.sdma).flags == RVGL_QUEUE_FLAG_INNOCENT && health_deadline(g) == 0;
      }));
      const auto ev = read_events(g.h);
      INFO("events: " << describe(ev));
      REQUIRE(ev.size() == 3);
      CHECK(ev[0].type == RVGL_EVENT_VM_FAULT);
      CHECK(ev[0].queue == g.compute);
      CHECK((ev[0].payload[0] & ~0xfffull) == (hole & ~0xfffull));
      CHECK(sorted_records(ev, 1) ==
            sorted({record(RVGL_EVENT_QUEUE_RESET, g.compute, RVGL_EVENT_RESET_GUILTY),
                    record(RVGL_EVENT_QUEUE_RESET, g.sdma, RVGL_EVENT_RESET_INNOCENT)}));
      CHECK(g.h.queue_state(g.compute).flags ==
            (RVGL_QUEUE_FLAG_GUILTY | RVGL_QUEUE_FLAG_VM_FAULT));
      CHECK(g.h.queue_state(g.sdma).state == RVGL_QUEUE_STATE_OK);
      CHECK(g.header().event_overflow == 0);
    }
  }
}

TEST_CASE("a fault of a destroyed queue's halted job is nobody's, 5 times each mode",
          "[robust][events]") {
  // vm_fault_stop=2 again, the faulting queue destroyed while its job is halted: no look takes
  // that job's failure (its queue is gone), so the next look, of a queue whose job ran to its
  // end, finds the fault new. Where a faulting job stops, that queue cannot have made it: the
  // fault is posted for no queue, and that queue's state stays clean (before, it was given the
  // fault).
  ScopedKnob stop("RVGL_EMU_VM_FAULT_STOP", "2");
  ScopedKnob halt("RVGL_EMU_FAULT_HALT_MS", "300", "0");
  REQUIRE(halt.ok());
  for (const bool async : {true, false}) {
    for (uint32_t run = 0; run < 5; ++run) {
      INFO(mode_name(async) << ", run " << run);
      Guest g(3500 + 100 * async + run, async);
      const uint64_t hole = halted_fault(g);
      REQUIRE(g.h.queue_destroy(g.compute) == 0);
      REQUIRE(until(g, [&] { return health_deadline(g) == 0; }));
      sdma_write_looked_at(g);
      // The halted job fails too (its queue is gone: no record of it) in a GPU reset, which the
      // SDMA queue hears of, innocent, by its next completion at the latest; then nothing is due.
      std::this_thread::sleep_for(std::chrono::milliseconds(350));
      sdma_write_looked_at(g);
      REQUIRE(until(g, [&] {
        return g.h.queue_state(g.sdma).flags == RVGL_QUEUE_FLAG_INNOCENT && health_deadline(g) == 0;
      }));
      const auto ev = read_events(g.h);
      INFO("events: " << describe(ev));
      REQUIRE(ev.size() == 2);
      CHECK(ev[0].type == RVGL_EVENT_VM_FAULT);
      CHECK(ev[0].queue == RVGL_EVENT_QUEUE_NONE);
      CHECK((ev[0].payload[0] & ~0xfffull) == (hole & ~0xfffull));
      CHECK(ev[1].type == RVGL_EVENT_QUEUE_RESET);
      CHECK(ev[1].queue == g.sdma);
      CHECK(ev[1].payload[0] == RVGL_EVENT_RESET_INNOCENT);
      CHECK(g.h.queue_state(g.sdma).state == RVGL_QUEUE_STATE_OK);  // never _VM_FAULT
      CHECK(g.header().event_overflow == 0);
    }
  }
}

TEST_CASE("the event ring overflows without blocking and counts exactly what it dropped",
          "[robust][events]") {
  ScopedKnob stop("RVGL_EMU_VM_FAULT_STOP", "2");
  for (const bool async : {true, false}) {
    for (int run = 0; run < kRuns; ++run) {
      INFO(mode_name(async) << ", run " << run);
      Guest g(2100 + 1000 * async + run, async, /*queues=*/false);
      fault_queues(g, /*drain=*/false, nullptr);
      REQUIRE(g.header().event_wptr == RVGL_EVENT_RING_ENTRIES);
      REQUIRE(g.header().event_overflow == 2 * kFaultingQueues - RVGL_EVENT_RING_ENTRIES);
      auto ev = read_events(g.h);
      REQUIRE(ev.size() == RVGL_EVENT_RING_ENTRIES);
      for (size_t i = 0; i < ev.size(); ++i)
        REQUIRE(ev[i].seq == i + 1);
    }
  }
}

TEST_CASE(
    "with vm_fault_stop=0 a fault that did not fail its job is still one VM_FAULT, 100 times each "
    "mode",
    "[robust][events]") {
  // The kernel's default: the faulting access is dropped, the job completes, only the VM's fault
  // cache knows (amdgpu_vm_update_fault_cache). Nothing is lost, reset or hung. In poll mode the
  // job's completion is made known on the VMM's thread, ahead of its check (completed_later()).
  ScopedKnob mode("RVGL_EMU_VM_FAULT_STOP", "0");
  REQUIRE(mode.ok());
  for (const bool async : {true, false}) {
    for (int run = 0; run < kRuns; ++run) {
      INFO(mode_name(async) << ", run " << run);
      Guest g(4100 + 1000 * async + run, async);
      std::vector<rvgl_event> ev;
      for (uint32_t i = 0; i < kFaultingQueues; ++i) {
        int32_t r;
        const uint32_t q = g.h.queue_create(RVGL_IP_COMPUTE, 10, &r);
        REQUIRE(r == 0);
        REQUIRE(g.write(g.va + (1ull << 31) + i * 0x10000, 1, q) == 0);
        REQUIRE(g.h.fence(10, i + 1) == 0);
        REQUIRE(g.h.wait_fence(10, i + 1));  // the job completed
        REQUIRE(
            until(g, [&] { return (g.h.queue_state(q).flags & RVGL_QUEUE_FLAG_VM_FAULT) != 0; }));
        const auto st = g.h.queue_state(q);
        REQUIRE(st.state == RVGL_QUEUE_STATE_OK);
        REQUIRE(st.flags == RVGL_QUEUE_FLAG_VM_FAULT);
        auto more = read_events(g.h);
        REQUIRE(more.size() == 1);
        REQUIRE(more[0].type == RVGL_EVENT_VM_FAULT);
        REQUIRE(more[0].queue == q);
        REQUIRE((more[0].payload[0] & ~0xfffull) ==
                ((g.va + (1ull << 31) + i * 0x10000) & ~0xfffull));
        ev.insert(ev.end(), more.begin(), more.end());
        REQUIRE(g.h.queue_destroy(q) == 0);
      }
      const EventCounts c = count(ev);
      REQUIRE(c.vm_fault == kFaultingQueues);
      REQUIRE(c.reset_guilty + c.reset_other + c.hang + c.other == 0);
      REQUIRE(g.header().event_wptr == kFaultingQueues);
    }
  }
}

TEST_CASE(
    "a faulting job whose error the kernel failed to report is still one VM_FAULT and one "
    "guilty reset, 20 times each mode",
    "[robust][events]") {
  // The health owner's WAIT_CS for the failed job fails once (EIO, ENOMEM): the job must not
  // pass for clean; the queue is looked at again and classified from a look that read it.
  ScopedKnob stop("RVGL_EMU_VM_FAULT_STOP", "2");
  for (const bool async : {true, false})
    for (const char *rule : {"WAIT_CS:1:EIO", "WAIT_CS:1:ENOMEM"})
      for (int run = 0; run < 20; ++run) {
        INFO(mode_name(async) << ", " << rule << ", run " << run);
        Guest g(5000 + 1000 * async + run, async, /*queues=*/false);
        int32_t r;
        const uint32_t q = g.h.queue_create(RVGL_IP_COMPUTE, 10, &r);
        REQUIRE(r == 0);
        rvgl_emu_reset_fault_injection();
        REQUIRE(rvgl_emu_set_knob("RVGL_EMU_FAIL", rule) == 0);
        REQUIRE(g.write(g.va + (1ull << 31), 1, q) == 0);
        REQUIRE(until(g, [&] { return g.h.queue_state(q).state == RVGL_QUEUE_STATE_LOST; }));
        rvgl_emu_reset_fault_injection();
        const auto st = g.h.queue_state(q);
        REQUIRE(st.flags == (RVGL_QUEUE_FLAG_GUILTY | RVGL_QUEUE_FLAG_VM_FAULT));
        REQUIRE(st.error == -ETIME);
        const auto ev = read_events(g.h);
        const EventCounts c = count(ev);
        REQUIRE(c.vm_fault == 1);
        REQUIRE(c.reset_guilty == 1);
        REQUIRE(c.hang + c.reset_other + c.other == 0);
        for (const auto &e : ev)
          REQUIRE(e.queue == q);
      }
}

TEST_CASE("a queue whose jobs the kernel never reports on is lost, not trusted, each mode",
          "[robust][events]") {
  ScopedKnob stop("RVGL_EMU_VM_FAULT_STOP", "2");
  for (const bool async : {true, false}) {
    INFO(mode_name(async));
    Guest g(5100 + 1000 * async, async);
    int32_t r;
    const uint32_t q = g.h.queue_create(RVGL_IP_COMPUTE, 10, &r);
    REQUIRE(r == 0);
    rvgl_emu_reset_fault_injection();
    // Neither the job's error nor its context's state can be read (a check that runs before the
    // job's kernel fence is recorded reads the context alone).
    REQUIRE(rvgl_emu_set_knob("RVGL_EMU_FAIL", "WAIT_CS:1+:EIO,CTX:1+:EIO") == 0);
    REQUIRE(g.write(g.va + (1ull << 31), 1, q) == 0);
    REQUIRE(until(g, [&] { return g.h.queue_state(q).state == RVGL_QUEUE_STATE_LOST; }));
    rvgl_emu_reset_fault_injection();
    const auto st = g.h.queue_state(q);
    REQUIRE(st.error == -EIO);
    REQUIRE(st.flags == 0);  // no cause the host could read
    // Its fault, left in the fault cache by the looks that could not read the queue, is posted
    // once for no queue: not pinned on the next queue to complete work.
    auto ev = read_events(g.h);
    REQUIRE(ev.size() == 1);
    REQUIRE(ev[0].type == RVGL_EVENT_VM_FAULT);
    REQUIRE(ev[0].queue == RVGL_EVENT_QUEUE_NONE);
    REQUIRE(g.write(g.va, 1, q) == -ECANCELED);
    // The context's other queues go on, told of the GPU reset that ended the job, innocent, once
    // each; and nothing more comes.
    settle(g, g.compute, 1, g.va, 2);
    REQUIRE(g.data.ptr<uint32_t>()[0] == 2);
    REQUIRE(until(g, [&] {
      return g.h.queue_state(g.sdma).flags == RVGL_QUEUE_FLAG_INNOCENT && health_deadline(g) == 0;
    }));
    REQUIRE(g.h.queue_state(g.compute).flags == RVGL_QUEUE_FLAG_INNOCENT);
    const auto more = read_events(g.h);
    INFO("events: " << describe(more));
    REQUIRE(sorted_records(more, 0) ==
            sorted({record(RVGL_EVENT_QUEUE_RESET, g.compute, RVGL_EVENT_RESET_INNOCENT),
                    record(RVGL_EVENT_QUEUE_RESET, g.sdma, RVGL_EVENT_RESET_INNOCENT)}));
    REQUIRE(g.header().event_wptr == 3);
  }
}

TEST_CASE("a fence on the events ring retires when a record arrives", "[robust][events]") {
  Guest g(6, /*async=*/false);
  REQUIRE(g.h.fence(RVGL_RING_EVENTS, 1) == 0);
  CHECK_FALSE(g.h.wait_fence(RVGL_RING_EVENTS, 1, 100));  // nothing happened yet
  REQUIRE(g.write(g.va + (1ull << 30), 1) == 0);          // fault
  CHECK(g.h.wait_fence(RVGL_RING_EVENTS, 1));
  // Records unread: the next events fence retires at once.
  REQUIRE(g.h.fence(RVGL_RING_EVENTS, 2) == 0);
  CHECK(g.h.wait_fence(RVGL_RING_EVENTS, 2, 1000));
}

namespace {

// 20 runs in each delivery mode of a context whose compute queue's 2nd job hangs and is ended as
// `knob` has it, beside a second compute queue and an idle SDMA queue: exactly one QUEUE_HANG,
// naming job 2, and one innocent QUEUE_RESET for each other queue (idle ones hear of the reset
// too), also after more work; the hung queue is lost with `error` and flags HANG only. With
// `third`, two jobs follow the hung one: the first wrote `*third` (0: cancelled), the second runs
// either way; without, the hung job is the queue's last.
void one_hang_of_its_queue(const char *knob, uint32_t ctx_base, int error,
                           std::optional<uint32_t> third) {
  ScopedKnob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "30", "10000");
  for (const bool async : {true, false}) {
    for (uint32_t run = 0; run < 20; ++run) {
      INFO(knob << ", " << (async ? "async" : "poll mode") << ", run " << run);
      ScopedKnob hang(knob, "2", "0");  // every kernel context's 2nd job
      REQUIRE(hang.ok());
      Guest g(ctx_base + 100 * async + run, async);
      int32_t r;
      const uint32_t other = g.h.queue_create(RVGL_IP_COMPUTE, 3, &r);
      REQUIRE(r == 0);
      REQUIRE(g.write(g.va + 12, 4, other) == 0);
      REQUIRE(g.write(g.va, 1) == 0);
      REQUIRE(g.write(g.va + 4, 2) == 0);  // hangs
      if (third) {
        REQUIRE(g.write(g.va + 8, 3) == 0);
        REQUIRE(g.write(g.va + 16, 5) == 0);
      }
      REQUIRE(g.h.fence(1, 1) == 0);
      REQUIRE(g.h.wait_fence(1, 1));
      const uint32_t *data = g.data.ptr<uint32_t>();
      REQUIRE(data[0] == 1);
      REQUIRE(data[1] == 0);
      REQUIRE(data[2] == third.value_or(0));
      REQUIRE(data[3] == 4);
      REQUIRE(data[4] == (third ? 5u : 0u));
      std::vector<rvgl_event> ev;
      const auto want = [&] {
        auto more = read_events(g.h);
        ev.insert(ev.end(), more.begin(), more.end());
        const EventCounts c = count(ev);
        return c.hang == 1 && c.reset_other == 2;
      };
      const bool all_came = until(g, want);
      INFO("records: " << describe(ev) << "; hung queue " << g.compute << " flags "
                       << g.h.queue_state(g.compute).flags << ", other " << other << " flags "
                       << g.h.queue_state(other).flags << ", sdma " << g.sdma << " flags "
                       << g.h.queue_state(g.sdma).flags);
      REQUIRE(all_came);
      // Nothing more comes, also after more work.
      REQUIRE(rvgl_emu_set_knob(knob, "0") == 0);
      REQUIRE(g.write(g.va + 20, 6, other) == 0);
      REQUIRE(g.h.fence(3, 2) == 0);
      REQUIRE(g.h.wait_fence(3, 2));
      REQUIRE(data[5] == 6);
      // Records are posted before the state they explain is published.
      REQUIRE(until(g, [&] { return g.h.queue_state(other).flags == RVGL_QUEUE_FLAG_INNOCENT; }));
      const auto settled = g.h.queue_state(other);
      REQUIRE(settled.state == RVGL_QUEUE_STATE_OK);
      auto more = read_events(g.h);
      ev.insert(ev.end(), more.begin(), more.end());
      const EventCounts c = count(ev);
      REQUIRE(c.hang == 1);
      REQUIRE(c.reset_other == 2);
      REQUIRE(c.reset_guilty + c.vm_fault + c.other == 0);
      for (const auto &e : ev) {
        if (e.type == RVGL_EVENT_QUEUE_HANG) {
          REQUIRE(e.queue == g.compute);
          REQUIRE(e.payload[0] == 2);
        } else {
          REQUIRE((e.queue == other || e.queue == g.sdma));
          REQUIRE(e.payload[0] == RVGL_EVENT_RESET_INNOCENT);
        }
      }
      const auto st = g.h.queue_state(g.compute);
      REQUIRE(st.state == RVGL_QUEUE_STATE_LOST);
      REQUIRE(st.flags == RVGL_QUEUE_FLAG_HANG);
      REQUIRE(st.error == error);
      REQUIRE(g.write(g.va + 24, 7) == -ECANCELED);
      REQUIRE(settled.flags == RVGL_QUEUE_FLAG_INNOCENT);
      REQUIRE(g.h.queue_state(g.sdma).flags == RVGL_QUEUE_FLAG_INNOCENT);
    }
  }
}

// The compute queue's 2nd job hung and the GPU reset blamed its context: exactly one QUEUE_HANG
// naming job 2 and one guilty QUEUE_RESET of that queue, one innocent QUEUE_RESET for each of
// `innocent`, nothing else; the queue is lost, GUILTY|HANG, -ETIME.
void one_guilty_hang(Guest &g, std::initializer_list<uint32_t> innocent) {
  std::vector<rvgl_event> ev;
  REQUIRE(until(g, [&] {
    auto more = read_events(g.h);
    ev.insert(ev.end(), more.begin(), more.end());
    const EventCounts c = count(ev);
    return c.hang == 1 && c.reset_guilty == 1 && c.reset_other == innocent.size();
  }));
  // A check posts its records before it publishes the states they explain (a guest that sees a
  // queue lost finds why), so the record may be read before the state is there.
  for (const uint32_t q : innocent)
    REQUIRE(until(g, [&] { return g.h.queue_state(q).flags == RVGL_QUEUE_FLAG_INNOCENT; }));
  auto more = read_events(g.h);
  ev.insert(ev.end(), more.begin(), more.end());
  const EventCounts c = count(ev);
  REQUIRE(c.hang == 1);
  REQUIRE(c.reset_guilty == 1);
  REQUIRE(c.reset_other == innocent.size());
  REQUIRE(c.vm_fault + c.other == 0);
  for (const auto &e : ev) {
    if (e.type == RVGL_EVENT_QUEUE_RESET && (e.payload[0] & RVGL_EVENT_RESET_INNOCENT)) {
      REQUIRE(std::find(innocent.begin(), innocent.end(), e.queue) != innocent.end());
      continue;
    }
    REQUIRE(e.queue == g.compute);
    if (e.type == RVGL_EVENT_QUEUE_HANG) REQUIRE(e.payload[0] == 2);
  }
  const auto st = g.h.queue_state(g.compute);
  REQUIRE(st.state == RVGL_QUEUE_STATE_LOST);
  REQUIRE(st.flags == (RVGL_QUEUE_FLAG_GUILTY | RVGL_QUEUE_FLAG_HANG));
  REQUIRE(st.error == -ETIME);
}

}  // namespace

TEST_CASE("a job the timeout's soft recovery killed is one hang of its queue, 20 times each mode",
          "[robust][events]") {
  // amdgpu_ring_soft_recovery(): the job's fence gets -ENODATA, its waves are killed and the ring
  // goes on, so its user fence is written as for a job that ran to its end; the device's reset
  // counter moves (every context sees RESET), nobody is guilty.
  one_hang_of_its_queue("RVGL_EMU_SOFT_RECOVER_JOB", 5000, -ENODATA, 3);
}

TEST_CASE("a soft-recovered last job counted late is one hang of its queue, 20 times each mode",
          "[robust][events]") {
  // Nothing follows the killed job, and its reset is counted 5 ms after its fence signalled
  // (mainline counts a soft recovery once it worked; its worker may be preempted in between): the
  // check after its completion trusted its user fence and its probe saw no reset, and no later
  // completion brings another check. The quiet look a trusting check leaves (queue_health.h) must
  // find it.
  ScopedKnob late("RVGL_EMU_RECOVERY_COUNT_DELAY_US", "5000", "0");
  REQUIRE(late.ok());
  one_hang_of_its_queue("RVGL_EMU_SOFT_RECOVER_JOB", 13000, -ENODATA, std::nullopt);
}

// [per-job-errors]: a kernel before 6.5, where the context's jobs queued behind the reset run on.
TEST_CASE("a hang only its queue's reset ended is one hang of its queue, 20 times each mode",
          "[robust][events][per-job-errors]") {
  // amdgpu_ring_reset() (Linux 6.12+), when soft recovery cannot end a hang: the job's fence gets
  // -ETIME without its user fence, the job the ring held behind it (same kernel context) is
  // cancelled, later jobs run; the device's reset counter moves and nobody is guilty. So the
  // queue's newest job may have succeeded while an earlier one hung.
  one_hang_of_its_queue("RVGL_EMU_RING_RESET_JOB", 9000, -ETIME, 0);
}

TEST_CASE("a last job only its queue's reset ended is one hang of its queue, 20 times each mode",
          "[robust][events]") {
  // As above with nothing queued behind the hung job: on Linux 6.5+ (robustness-entity-errors)
  // every job of its context then answers the hung job's -ETIME, the first job's too, and the
  // hang is still named by its own job.
  one_hang_of_its_queue("RVGL_EMU_RING_RESET_JOB", 17000, -ETIME, std::nullopt);
}

TEST_CASE("a hung queue is reported, then destroyed and recreated, 10 times each mode",
          "[robust][events]") {
  // The job timeout resets the GPU and blames the hung job's context (RVGL_EMU_HANG_JOB,
  // amdgpu_device_gpu_recover()): one QUEUE_HANG naming job 2 and one guilty QUEUE_RESET of its
  // queue; the device's reset counter moved, so the context's idle SDMA queue hears of it as an
  // innocent reset (docs/robustness.md, promise 4).
  ScopedKnob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "30", "10000");
  for (const bool async : {true, false}) {
    for (uint32_t run = 0; run < 10; ++run) {
      INFO(mode_name(async) << ", run " << run);
      ScopedKnob hang("RVGL_EMU_HANG_JOB", "2", "0");  // every kernel context's 2nd job
      REQUIRE(hang.ok());
      Guest g(21000 + 100 * async + run, async);
      REQUIRE(g.write(g.va, 1) == 0);      // job 1 runs
      REQUIRE(g.write(g.va + 4, 2) == 0);  // job 2 hangs
      REQUIRE(g.fenced(1));
      one_guilty_hang(g, {g.sdma});
      REQUIRE(g.data.ptr<uint32_t>()[0] == 1);
      REQUIRE(g.data.ptr<uint32_t>()[1] == 0);
      const uint32_t hung = g.compute;
      REQUIRE(g.h.queue_destroy(hung) == 0);
      int32_t r;
      g.compute = g.h.queue_create(RVGL_IP_COMPUTE, 1, &r);
      REQUIRE(r == 0);
      // Job 1 of the new queue runs; nothing more comes, for it or for the others.
      settle(g, g.compute, 1, g.va + 8, 3);
      REQUIRE(g.data.ptr<uint32_t>()[2] == 3);
      const auto st = g.h.queue_state(g.compute);
      REQUIRE(st.state == RVGL_QUEUE_STATE_OK);
      REQUIRE(st.flags == 0);
      REQUIRE(read_events(g.h).empty());
      REQUIRE(g.header().event_wptr == 3);
      REQUIRE(g.header().event_overflow == 0);
    }
  }
}

TEST_CASE("a hang followed by more work is one hang, named by its first failed job, each mode",
          "[robust][events]") {
  // The kernel gives the timed-out job -ETIME and cancels the guilty context's later jobs
  // (-ECANCELED): the queue's newest job error is not the cause, its first one is.
  ScopedKnob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "30", "10000");
  for (const bool async : {true, false}) {
    for (int run = 0; run < 20; ++run) {
      INFO(mode_name(async) << ", run " << run);
      ScopedKnob hang("RVGL_EMU_HANG_JOB", "2", "0");
      Guest g(7000 + 100 * async + run, async);
      REQUIRE(g.write(g.va, 1) == 0);
      REQUIRE(g.write(g.va + 4, 2) == 0);   // hangs
      REQUIRE(g.write(g.va + 8, 3) == 0);   // cancelled
      REQUIRE(g.write(g.va + 12, 4) == 0);  // cancelled
      // The GPU reset also reaches the context's idle SDMA queue (innocent).
      one_guilty_hang(g, {g.sdma});
    }
  }
}

TEST_CASE("a context seen guilty while its GPU reset runs is one hang at its job's signal",
          "[robust][events]") {
  // amdgpu_device_gpu_recover(): the hung job's context reads GUILTY, and the reset counter has
  // moved, for the whole ASIC reset before the job's fence signals (300 ms here). The quiet look
  // another queue's completion left comes inside that window, hears of the reset and looks at the
  // hung queue: it must leave it to the check the signal brings, which names the job. Published
  // then, the guilty reset would come without its hang.
  ScopedKnob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "5", "10000");
  ScopedKnob reset("RVGL_EMU_FULL_RESET_US", "300000", "0");
  REQUIRE(reset.ok());
  for (const bool async : {true, false}) {
    for (uint32_t run = 0; run < 10; ++run) {
      INFO((async ? "async" : "poll mode") << ", run " << run);
      ScopedKnob hang("RVGL_EMU_HANG_JOB", "2", "0");  // every kernel context's 2nd job
      REQUIRE(hang.ok());
      Guest g(14000 + 100 * async + run, async);
      int32_t r;
      const uint32_t other = g.h.queue_create(RVGL_IP_COMPUTE, 3, &r);
      REQUIRE(r == 0);
      REQUIRE(g.write(g.va, 1) == 0);
      REQUIRE(g.write(g.va + 12, 4, other) == 0);
      REQUIRE(g.h.fence(3, 1) == 0);
      REQUIRE(g.h.wait_fence(3, 1));
      REQUIRE(g.write(g.va + 4, 2) == 0);  // hangs 5 ms later; signals 300 ms after that
      REQUIRE(g.h.fence(1, 1) == 0);
      REQUIRE(g.h.wait_fence(1, 1));
      one_guilty_hang(g, {other, g.sdma});
    }
  }
}

TEST_CASE("a GPU reset another context's hang caused reaches an idle context, 20 times each mode",
          "[robust][events]") {
  // An idle context has no completion to be checked after: the check that first hears of the
  // reset (the hung context's) has every other context look (reset_notices.h).
  ScopedKnob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "30", "10000");
  for (const bool async : {true, false}) {
    for (uint32_t run = 0; run < 20; ++run) {
      INFO((async ? "async" : "poll mode") << ", run " << run);
      Guest idle(11000 + 100 * async + run, async);
      REQUIRE(idle.write(idle.va, 1) == 0);  // one job, then nothing
      REQUIRE(idle.h.fence(1, 1) == 0);
      REQUIRE(idle.h.wait_fence(1, 1));
      // Its completion's check is over before the reset: the context's first check has ended,
      // and it has nothing scheduled (that check filed a quiet look, counted before the check
      // was; see settle()).
      REQUIRE(until(
          idle, [&] { return idle.h.ctx().health().checks() > 0 && health_deadline(idle) == 0; }));
      std::vector<rvgl_event> seen = read_events(idle.h);
      REQUIRE(seen.empty());
      std::vector<rvgl_event> culprit_ev;
      {
        ScopedKnob hang("RVGL_EMU_HANG_JOB", "1", "0");  // the culprit's first job
        REQUIRE(hang.ok());
        Guest culprit(12000 + 100 * async + run, async);
        REQUIRE(culprit.write(culprit.va, 1) == 0);  // hangs: the GPU is reset
        REQUIRE(culprit.h.fence(1, 1) == 0);         // the VMM's thread learns of it (poll mode)
        REQUIRE(culprit.h.wait_fence(1, 1));
        REQUIRE(until([&] {
          auto more = read_events(culprit.h);
          culprit_ev.insert(culprit_ev.end(), more.begin(), more.end());
          const EventCounts c = count(culprit_ev);
          return c.hang == 1 && c.reset_guilty == 1 && c.reset_other == 1;
        }));
        // The idle context's two queues hear of it with no work of their own.
        REQUIRE(until([&] {
          auto more = read_events(idle.h);
          seen.insert(seen.end(), more.begin(), more.end());
          return count(seen).reset_other == 2;
        }));
        // Records are posted before the states they explain are published.
        REQUIRE(until([&] {
          return idle.h.queue_state(idle.compute).flags == RVGL_QUEUE_FLAG_INNOCENT &&
                 idle.h.queue_state(idle.sdma).flags == RVGL_QUEUE_FLAG_INNOCENT;
        }));
        const auto compute = idle.h.queue_state(idle.compute);
        const auto sdma = idle.h.queue_state(idle.sdma);
        REQUIRE(compute.state == RVGL_QUEUE_STATE_OK);
        REQUIRE(compute.flags == RVGL_QUEUE_FLAG_INNOCENT);
        REQUIRE(sdma.flags == RVGL_QUEUE_FLAG_INNOCENT);
      }
      // Nothing more, also after more work of the idle context.
      REQUIRE(idle.write(idle.va + 4, 2) == 0);
      REQUIRE(idle.h.fence(1, 2) == 0);
      REQUIRE(idle.h.wait_fence(1, 2));
      REQUIRE(idle.data.ptr<uint32_t>()[1] == 2);
      const auto settled = idle.h.queue_state(idle.compute);
      REQUIRE(settled.state == RVGL_QUEUE_STATE_OK);
      auto more = read_events(idle.h);
      seen.insert(seen.end(), more.begin(), more.end());
      const EventCounts c = count(seen);
      REQUIRE(c.reset_other == 2);
      REQUIRE(c.hang + c.reset_guilty + c.vm_fault + c.other == 0);
      for (const auto &e : seen) {
        REQUIRE((e.queue == idle.compute || e.queue == idle.sdma));
        REQUIRE(e.payload[0] == RVGL_EVENT_RESET_INNOCENT);
      }
      const EventCounts cc = count(culprit_ev);
      REQUIRE(cc.hang + cc.reset_guilty + cc.reset_other == 3);
      REQUIRE(cc.vm_fault + cc.other == 0);
    }
  }
}
