// Guest pages handed back while a job that may reach them still runs. The kernel clears a freed
// mapping's page-table entries only after the VM's submissions in flight finish
// (amdgpu_vm_clear_freed(): "Implicitly sync to command submissions in the same VM before
// unmapping"), so such a job writes into the pages after the unmap returns; the guest reuses them
// once the VMM answers the detach. So detach, unref and context destroy wait for those jobs (the
// emulator keeps an unmapped range for the jobs submitted before the unmap, as the kernel does).
// The job, held at a gate the watchdog opens 150 ms later, writes a marker into a BO and then a
// word into the guest pages: both must be there when the call returns, not land afterwards.
#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>

#include "../tools/common/amd_packets.h"
#include "support/context_harness.h"
#include "support/gate_watchdog.h"
#include "support/guest_ram.h"
#include "support/scoped_knob.h"
#include "support/wait_for.h"

using namespace rvgl;
using namespace rvgl::test;

namespace {

constexpr uint64_t kGate = 60 * 1024;
constexpr uint64_t kMarker = 56 * 1024;
constexpr uint64_t kIb = 4096;
constexpr uint64_t kPagesVa = 1ull << 20;  // the guest pages' VA, above the BO's
constexpr uint64_t kPageWord = 8 * 1024;   // the word of the guest pages the job writes
constexpr uint32_t kPageValue = 0x5a5a5a5a;
constexpr auto kOpenAfter = std::chrono::milliseconds(150);

// One guest with a mapped BO (gate, marker, IB), 64 KiB of guest pages as a userptr blob, and an
// SDMA queue whose one job waits at the gate, then writes the marker.
struct Guest {
  explicit Guest(bool async) : h(test_config(), async) {
    h.create_shmem();
    va = h.capset().va_start;
    buf = h.mapped_bo(64 * 1024);
    REQUIRE(h.va_map(buf.bo, 0, 0, va, 64 * 1024) == 0);
    int err = 0;
    pages_res = userptr_blob(h, pages, &err);
    REQUIRE(err == 0);
    int32_t r;
    queue = h.queue_create(RVGL_IP_SDMA, 1, &r);
    REQUIRE(r == 0);
  }
  int32_t map_pages() { return h.va_map(0, pages_res, 0, va + kPagesVa, pages.bytes); }
  uint32_t *words() const { return buf.ptr<uint32_t>(); }
  uint32_t *gate() const { return words() + kGate / 4; }
  uint32_t marker() const { return __atomic_load_n(words() + kMarker / 4, __ATOMIC_ACQUIRE); }
  uint32_t page_word() const {
    return __atomic_load_n(reinterpret_cast<uint32_t *>(pages.ptr(kPageWord)), __ATOMIC_ACQUIRE);
  }
  // touch_pages: the job also writes kPageValue into the guest pages (mapped at submit).
  void submit_gated_job(bool touch_pages) {
    std::vector<uint32_t> ib;
    packets::sdma_poll_mem_equal(ib, va + kGate, 1, 0xffffffffu);
    packets::sdma_write_linear(ib, va + kMarker, {1});
    if (touch_pages) packets::sdma_write_linear(ib, va + kPagesVa + kPageWord, {kPageValue});
    packets::sdma_pad(ib);
    int32_t r;
    REQUIRE(h.submit(queue, {ContextHarness::write_ib(buf, va, ib, kIb)}, {}, &r) == 1);
    REQUIRE(r == 0);
  }

  GuestPages pages{64 * 1024};  // outlives the context, as the VMM's guest RAM does
  ContextHarness h;
  ContextHarness::HostBuffer buf;
  uint64_t va = 0;
  uint32_t pages_res = 0;
  uint32_t queue = 0;
};

}  // namespace

TEST_CASE("detaching guest pages the GPU mapped waits for the jobs that may still reach them",
          "[context][userptr][release]") {
  ScopedKnob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "30000", "2000");
  REQUIRE(lockup.ok());
  const bool async = GENERATE(false, true);
  // still mapped; unmapped by the guest first (the job was submitted while they were mapped);
  // the job's queue destroyed before the detach.
  const int how = GENERATE(0, 1, 2);
  for (int round = 0; round < 3; ++round) {
    INFO("async " << async << " variant " << how << " round " << round);
    Guest g(async);
    REQUIRE(g.map_pages() == 0);
    g.submit_gated_job(true);
    if (how == 1) REQUIRE(g.h.va_unmap(g.va + kPagesVa, g.pages.bytes) == 0);
    if (how == 2) REQUIRE(g.h.queue_destroy(g.queue) == 0);
    GateWatchdog gate(g.gate(), kOpenAfter);
    g.h.ctx().detach_resource(g.pages_res);
    // The job was done when the VMM got its answer: its write into the pages is there already.
    CHECK(g.marker() == 1);
    CHECK(g.page_word() == kPageValue);
    CHECK_FALSE(g.h.ctx().has_resource(g.pages_res));
  }
}

TEST_CASE("destroying a context waits for the jobs that may reach its mapped guest pages",
          "[context][userptr][release]") {
  ScopedKnob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "30000", "2000");
  REQUIRE(lockup.ok());
  const bool async = GENERATE(false, true);
  for (int round = 0; round < 3; ++round) {
    INFO("async " << async << " round " << round);
    Guest g(async);
    REQUIRE(g.map_pages() == 0);
    g.submit_gated_job(true);
    GateWatchdog gate(g.gate(), kOpenAfter);
    g.h.ctx().close();
    CHECK(g.marker() == 1);
    CHECK(g.page_word() == kPageValue);
  }
}

TEST_CASE("a wait the kernel refuses does not end the wait for jobs that may reach guest pages",
          "[context][userptr][release]") {
  // SYNCOBJ_TIMELINE_WAIT answers ENOMEM (a kernel short of memory) every time: that says nothing
  // of the job, so detach and destroy go on waiting (asking again, and seeing what the completion
  // engine sees reached) rather than return with the job still to write into the pages.
  ScopedKnob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "30000", "2000");
  REQUIRE(lockup.ok());
  const bool async = GENERATE(false, true);
  const bool destroy = GENERATE(false, true);
  INFO("async " << async << (destroy ? ", context destroy" : ", detach"));
  Guest g(async);
  REQUIRE(g.map_pages() == 0);
  g.submit_gated_job(true);
  rvgl_emu_reset_fault_injection();
  ScopedKnob refuse("RVGL_EMU_FAIL", "SYNCOBJ_TIMELINE_WAIT:1+:ENOMEM", "");
  REQUIRE(refuse.ok());
  GateWatchdog gate(g.gate(), kOpenAfter);
  if (destroy)
    g.h.ctx().close();
  else
    g.h.ctx().detach_resource(g.pages_res);
  CHECK(g.marker() == 1);
  CHECK(g.page_word() == kPageValue);
  rvgl_emu_reset_fault_injection();
}

TEST_CASE("guest pages the GPU never mapped are let go without waiting for jobs",
          "[context][userptr][release]") {
  ScopedKnob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "30000", "2000");
  REQUIRE(lockup.ok());
  const bool async = GENERATE(false, true);
  Guest g(async);
  g.submit_gated_job(false);
  GateWatchdog gate(g.gate());  // opened below, or in 10 s if the detach waited
  g.h.ctx().detach_resource(g.pages_res);
  CHECK(__atomic_load_n(g.gate(), __ATOMIC_ACQUIRE) == 0);
  CHECK(g.marker() == 0);
  gate.open();
  CHECK(wait_for([&] { return g.marker() == 1; }));
}

TEST_CASE("a VA_MAP the kernel refuses part way still makes detach and destroy wait for jobs",
          "[context][userptr][release]") {
  // The blob's first piece was mapped and then undone; the kernel clears those page-table entries
  // only after the jobs in flight, so a job submitted before the VA_MAP may still write through
  // them. Only a VA_MAP that succeeded counted as the pages being reachable: detach and destroy
  // returned at once, and the job wrote into the pages afterwards. Found by a review.
  ScopedKnob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "30000", "2000");
  REQUIRE(lockup.ok());
  const bool async = GENERATE(false, true);
  const bool destroy = GENERATE(false, true);
  INFO("async " << async << (destroy ? ", context destroy" : ", detach"));
  Guest g(async);
  g.h.ctx().detach_resource(g.pages_res);  // no other blob covers the pages
  // The guest pages in two ranges, halves swapped: two kernel objects, two GEM_VA maps. The job
  // writes the blob's offset kPageWord, in the first piece: the pages' 32 KiB + kPageWord.
  const iovec halves[2] = {{g.pages.ptr(32 * 1024), 32 * 1024}, {g.pages.ptr(0), 32 * 1024}};
  int err = 0;
  const uint32_t res = userptr_blob(g.h, std::span<const iovec>(halves, 2), &err);
  REQUIRE(err == 0);
  g.submit_gated_job(true);
  rvgl_emu_reset_fault_injection();
  {
    ScopedKnob refuse("RVGL_EMU_FAIL", "GEM_VA:2:ENOMEM", "");
    REQUIRE(refuse.ok());
    CHECK(g.h.va_map(0, res, 0, g.va + kPagesVa, 64 * 1024) == -ENOMEM);
  }
  rvgl_emu_reset_fault_injection();
  GateWatchdog gate(g.gate(), kOpenAfter);
  if (destroy)
    g.h.ctx().close();
  else
    g.h.ctx().detach_resource(res);
  CHECK(g.marker() == 1);
  CHECK(__atomic_load_n(reinterpret_cast<uint32_t *>(g.pages.ptr(32 * 1024 + kPageWord)),
                        __ATOMIC_ACQUIRE) == kPageValue);
}
