// A context fence made while memory is short: create_fence has no way to lose it. QEMU ignores
// virgl_renderer_context_create_fence's result and retires the guest's command only when that
// fence (or a later one of its ring) is written, so a fence refused with -ENOMEM was a guest
// waiting for ever on its ring's last command.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "robustness/alloc_failure.h"
#include "robustness/robust_support.h"
#include "support/gate_watchdog.h"

using namespace rvgl;
using namespace rvgl::test;
namespace pk = rvgl::packets;

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint32_t kRing = 1;
// Fences made while every allocation is refused: more than a ring's first block of pending
// fences holds (a std::deque's 512 bytes), so some of them need memory.
constexpr uint64_t kShort = 40;
constexpr uint64_t kAfter = 10;  // made once memory is back, behind the ones that had none
// A job for every second fence: the kernel lets an entity have 32 jobs unsignalled (a CS waits
// for the job amdgpu_sched_jobs back), and here all of them wait behind the first.
constexpr uint64_t kJobs = (kShort + kAfter) / 2;
static_assert(kJobs < 32);
constexpr uint32_t kGateSlot = 1000;
static_assert((kJobs + 1) * 256 <= 4 * kPage);

}  // namespace

TEST_CASE("a fence made with no memory left retires, reported for the ring's last ones",
          "[alloc][fence]") {
  for (const bool async : {false, true}) {
    INFO((async ? "async callbacks" : "poll mode"));
    ContextHarness h(test_config(), async, 1);
    h.create_shmem();
    const uint64_t va = h.capset().va_start;
    auto data = h.mapped_bo(2 * kPage);
    auto ib = h.mapped_bo(4 * kPage);  // kJobs IBs of 256 bytes
    REQUIRE(h.va_map(data.bo, 0, 0, va, 2 * kPage) == 0);
    REQUIRE(h.va_map(ib.bo, 0, 0, va + (1 << 24), 4 * kPage) == 0);
    int32_t r;
    const uint32_t queue = h.queue_create(RVGL_IP_SDMA, kRing, &r);
    REQUIRE(r == 0);
    GateWatchdog gate(data.ptr<uint32_t>() + kGateSlot);  // opened below, or in 10 s
    // Job j writes j to word j; the first waits at the gate first, so every fence below waits.
    // Fence i waits for job (i + 1) / 2, made just before it when i is odd.
    auto submit = [&](uint64_t i) {
      if (i % 2 == 0) return;
      std::vector<uint32_t> dw;
      if (i == 1) pk::sdma_poll_mem_equal(dw, va + kGateSlot * 4, 1, 0xffffffffu);
      const uint64_t j = (i + 1) / 2;
      pk::sdma_write_linear(dw, va + j * 4, {static_cast<uint32_t>(j)});
      pk::sdma_pad(dw);
      h.submit(queue, {ContextHarness::write_ib(ib, va + (1 << 24), dw, j * 256)}, {}, &r);
      REQUIRE(r == 0);
    };
    uint64_t first_short = 0;  // the first fence whose making was refused memory
    uint64_t refused = 0;
    for (uint64_t i = 1; i <= kShort; ++i) {
      INFO("fence " << i);
      submit(i);
      alloc::Armed refusing(1, /*from_then_on=*/true);
      REQUIRE(h.fence(kRing, i) == 0);
      const alloc::Tally t = refusing.tally();
      if (t.failed && !first_short) first_short = i;
      refused += t.failed;
    }
    REQUIRE(first_short > 1);  // the first fences fit where the ring had room
    REQUIRE(refused > 0);      // otherwise this proved nothing
    for (uint64_t i = kShort + 1; i <= kShort + kAfter; ++i) {
      submit(i);
      REQUIRE(h.fence(kRing, i) == 0);
    }
    gate.open();
    REQUIRE(h.wait_fence(kRing, kShort + kAfter));
    // Each fence that had room reported itself; the ones made from the first short one on are
    // reported by the last of them, which the VMM retires them with; the later ones each.
    std::vector<uint64_t> want;
    for (uint64_t i = 1; i < first_short; ++i)
      want.push_back(i);
    want.push_back(kShort);
    for (uint64_t i = kShort + 1; i <= kShort + kAfter; ++i)
      want.push_back(i);
    std::vector<uint64_t> got;
    for (const auto &f : h.fences().snapshot()) {
      CHECK(f.ring == kRing);
      got.push_back(f.id);
    }
    CHECK(got == want);
    CHECK(h.ctx().fences().retired() == kShort + kAfter);
    CHECK(h.ctx().fences().waiting() == 0);
    for (uint64_t j = 1; j <= kJobs; ++j)
      CHECK(data.ptr<uint32_t>()[j] == j);
  }
}
