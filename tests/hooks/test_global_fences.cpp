// Global fences on a VMM without context fences (issue 15, point 1): 1,000 guest fences, each
// created after a job of random length on one of four SDMA queues of two ROCM contexts; no fence
// may retire before every job submitted ahead of it has completed: each job writes its number
// on its queue into guest memory, read at the moment the VMM is told. The VMM retires every id <=
// the one written (QEMU's virgl_write_fence), so each write is checked for every fence it retires.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "../../tools/common/amd_packets.h"
#include "mini_vmm.h"
#include "renderer_fixture.h"
#include "rocm_guest.h"

using namespace rvgl::hooks_test;
namespace pk = rvgl::packets;

namespace {

constexpr uint64_t kSize = 16 * 1024;
constexpr uint32_t kFences = 1000;

// A queue of the 1,000-fence test: its copy's source and destination, its job marker (the
// number of its newest job that ran, written by the job itself) and its guest's IB buffer.
struct Queue {
  RocmGuest *guest;
  uint32_t handle;
  uint32_t guest_index;
  uint64_t src_va, dst_va;
  uint64_t marker_va;
  const uint32_t *marker;  // the guest's mapping of it
  uint64_t ib_va;          // the IB buffer's start
};
constexpr uint64_t kBufBytes = 4 * kSize + 4096;  // two copies' buffers, then the markers
constexpr uint64_t kIbSlot = 128;                 // bytes of one job's IB
constexpr uint64_t kIbBytes = 2048 * kIbSlot;     // at most 2 jobs per fence, all in one guest
constexpr uint64_t kIbOffset = 8 * kSize;         // the IB buffer's place in the guest's VM

// A buffer of 2 x kSize and an IB copying its first half into its second, mapped in `g`'s VM.
struct CopyIb {
  uint64_t va;  // the IB's
  size_t dwords;
};
CopyIb one_copy(RocmGuest &g) {
  const uint64_t va = g.caps().va_start;
  auto [buf_bo, buf_res] = g.bo_blob(2 * kSize, RVGL_DOMAIN_GTT);
  auto [ib_bo, ib_res] = g.bo_blob(kSize, RVGL_DOMAIN_GTT);
  auto *ib = static_cast<uint32_t *>(g.map(ib_res, kSize));
  REQUIRE(g.va_map(buf_bo, 0, va, 2 * kSize) == 0);
  REQUIRE(g.va_map(ib_bo, 0, va + 2 * kSize, kSize, RVGL_VA_FLAG_READ | RVGL_VA_FLAG_EXECUTE) == 0);
  std::vector<uint32_t> copy;
  pk::sdma_copy_linear(copy, va + kSize, va, static_cast<uint32_t>(kSize));
  pk::sdma_pad(copy);
  std::memcpy(ib, copy.data(), copy.size() * 4);
  return {va + 2 * kSize, copy.size()};
}

void run(VmmProfile p, bool vrend_wanted) {
  ScopedEnv sw("LIBGL_ALWAYS_SOFTWARE", "1");
  ScopedEnv capset("RVGL_CAPSET_ID", nullptr);
  auto vmm = std::make_unique<MiniVmm>(p);
  if (vmm->result() != 0 && vrend_wanted) {
    WARN("no surfaceless EGL here: vrend is off (NO_VIRGL), so the fences are ours alone");
    vmm.reset();
    p.flags = (p.flags & ~(VIRGL_RENDERER_USE_EGL | VIRGL_RENDERER_USE_SURFACELESS)) |
              VIRGL_RENDERER_NO_VIRGL;
    vmm = std::make_unique<MiniVmm>(p);
  }
  REQUIRE(vmm->result() == 0);

  // Two contexts, two SDMA queues each, every queue copying its own buffer. Each job is an IB of
  // its own: the copy, then the job's number on its queue written to the queue's marker, so the
  // guest's memory says exactly which jobs of each queue have run.
  std::vector<std::unique_ptr<RocmGuest>> guests;
  std::vector<Queue> queues;
  std::vector<uint32_t *> ibs;
  for (uint32_t c = 0; c < 2; ++c) {
    auto g = std::make_unique<RocmGuest>(10 + c, 100 + 50 * c);
    g->start();
    const uint64_t va = g->caps().va_start;
    auto [buf_bo, buf_res] = g->bo_blob(kBufBytes, RVGL_DOMAIN_GTT);
    auto [ib_bo, ib_res] = g->bo_blob(kIbBytes, RVGL_DOMAIN_GTT);
    auto *buf = static_cast<uint8_t *>(g->map(buf_res, kBufBytes));
    ibs.push_back(static_cast<uint32_t *>(g->map(ib_res, kIbBytes)));
    REQUIRE(g->va_map(buf_bo, 0, va, kBufBytes) == 0);
    REQUIRE(g->va_map(ib_bo, 0, va + kIbOffset, kIbBytes,
                      RVGL_VA_FLAG_READ | RVGL_VA_FLAG_EXECUTE) == 0);
    for (uint32_t q = 0; q < 2; ++q) {
      const uint64_t marker = 4 * kSize + 64 * q;
      queues.push_back({g.get(), g->queue_create(RVGL_IP_SDMA, 1 + q), c, va + 2 * q * kSize,
                        va + (2 * q + 1) * kSize, va + marker,
                        reinterpret_cast<uint32_t *>(buf + marker), va + kIbOffset});
    }
    guests.push_back(std::move(g));
  }

  // What each queue's marker held when the VMM was told of each global fence (on the thread
  // that delivered it).
  struct Seen {
    uint64_t id;
    std::vector<uint32_t> markers;
  };
  std::mutex seen_mu;
  std::vector<Seen> seen;
  vmm->on_retire([&](uint32_t ctx, uint64_t id) {
    if (ctx != 0) return;
    Seen s{id, {}};
    for (const Queue &q : queues)
      s.markers.push_back(__atomic_load_n(q.marker, __ATOMIC_ACQUIRE));
    std::lock_guard lk(seen_mu);
    seen.push_back(std::move(s));
  });

  std::mt19937 rng(1000);
  const uint64_t jobs0 = MiniVmm::jobs_completed();
  std::map<uint64_t, std::vector<uint32_t>> jobs_before;  // fence id -> jobs of each queue
  std::vector<uint32_t> jobs(queues.size(), 0);
  std::vector<uint32_t> slots(guests.size(), 0);  // IB slots used in each guest's IB buffer
  uint64_t submitted = 0;
  for (uint32_t id = 1; id <= kFences; ++id) {
    // Zero, one or two jobs before each fence, of random length (0..400 us).
    const uint32_t n = rng() % 3;
    for (uint32_t j = 0; j < n; ++j) {
      const std::string lat = std::to_string(rng() % 400);
      REQUIRE(rvgl_emu_set_knob("RVGL_EMU_JOB_LATENCY_US", lat.c_str()) == 0);
      const size_t qi = rng() % queues.size();
      const Queue &q = queues[qi];
      std::vector<uint32_t> dw;
      pk::sdma_copy_linear(dw, q.dst_va, q.src_va, static_cast<uint32_t>(kSize));
      pk::sdma_write_linear(dw, q.marker_va, {++jobs[qi]});
      pk::sdma_pad(dw);
      const uint32_t slot = slots[q.guest_index]++;
      REQUIRE(slot < kIbBytes / kIbSlot);
      REQUIRE(dw.size() * 4 <= kIbSlot);
      std::memcpy(ibs[q.guest_index] + slot * (kIbSlot / 4), dw.data(), dw.size() * 4);
      q.guest->submit(q.handle, q.ib_va + slot * kIbSlot, dw.size());
      ++submitted;
    }
    jobs_before[id] = jobs;
    REQUIRE(vmm->fence(0, 0, id) == 0);
    if (id % 8 == 0) virgl_renderer_poll();  // the VMM's timer between batches of commands
  }
  REQUIRE(vmm->run_until([&] { return vmm->newest_global() >= kFences; }));
  REQUIRE(rvgl_emu_set_knob("RVGL_EMU_JOB_LATENCY_US", "0") == 0);

  // Every write, and every fence it retires (ids above the previous write, up to it): each job
  // submitted before the fence, on every queue, had run when the VMM was told.
  uint64_t prev = 0, checked = 0;
  std::lock_guard lk(seen_mu);
  for (const Seen &w : seen) {
    if (w.id <= prev) continue;
    for (uint64_t id = prev + 1; id <= w.id && id <= kFences; ++id, ++checked) {
      INFO("fence " << id << " written as " << w.id);
      for (size_t q = 0; q < queues.size(); ++q) {
        INFO("queue " << q);
        REQUIRE(w.markers[q] >= jobs_before[id][q]);
      }
    }
    prev = w.id;
  }
  CHECK(checked == kFences);
  CHECK(prev == kFences);
  CHECK(MiniVmm::jobs_completed() - jobs0 == submitted);
  for (const auto &t : vmm->threads())
    if (!p.async()) CHECK(t == std::this_thread::get_id());
  CHECK(vmm->written_inside_create() == 0);
  for (auto &g : guests)
    virgl_renderer_context_destroy(g->ctx_id());
}

}  // namespace

TEST_CASE("1,000 global fences never retire before earlier ROCM work (no ctx0 renderer)",
          "[global-1000]") {
  // QEMU 10.0's callbacks (version 1) with vrend off: the real library refuses ctx0 fences, so
  // they are ours alone.
  run({"qemu-10.0", 1, VIRGL_RENDERER_NO_VIRGL, false, false, 8, nullptr, false, false, false,
       false},
      false);
}

TEST_CASE("1,000 global fences never retire before earlier ROCM work (vrend signals too)",
          "[global-1000-vrend]") {
  run({"qemu-10.0", 1, VIRGL_RENDERER_USE_EGL | VIRGL_RENDERER_USE_SURFACELESS, false, false, 8,
       nullptr, false, false, false, false},
      true);
}

TEST_CASE("1,000 global fences with ASYNC_FENCE_CB: delivered by the waiter thread",
          "[global-1000-async]") {
  // No virgl_renderer_poll is needed for delivery here, but the VMM still polls on its timer.
  run({"async", 4,
       VIRGL_RENDERER_NO_VIRGL | VIRGL_RENDERER_ASYNC_FENCE_CB | VIRGL_RENDERER_THREAD_SYNC, false,
       false, 8, nullptr, false, false, false, false},
      false);
}

TEST_CASE("a global fence vrend signals is not held back by a later fence held for ROCM work",
          "[global-1000-vrend]") {
  ScopedEnv sw("LIBGL_ALWAYS_SOFTWARE", "1");
  ScopedEnv capset("RVGL_CAPSET_ID", nullptr);
  MiniVmm vmm({"qemu-10.0", 1, VIRGL_RENDERER_USE_EGL | VIRGL_RENDERER_USE_SURFACELESS, false,
               false, 8, nullptr, false, false, false, false});
  if (vmm.result() != 0) {
    WARN("no surfaceless EGL here: vrend is off, nothing to pass through");
    return;
  }
  RocmGuest g(10, 100);
  g.start();
  const CopyIb copy = one_copy(g);
  const uint32_t q = g.queue_create(RVGL_IP_SDMA, 1);
  for (uint32_t round = 0; round < 3; ++round) {
    INFO("round " << round);
    const uint32_t passed = 10 * round + 3, held = passed + 2;
    // Nothing of ours outstanding: passed straight to vrend, which signals it at its next poll.
    REQUIRE(vmm.fence(0, 0, passed) == 0);
    // Long enough that vrend's next poll comes first even under a sanitizer on a loaded machine.
    REQUIRE(rvgl_emu_set_knob("RVGL_EMU_JOB_LATENCY_US", "1500000") == 0);
    g.submit(q, copy.va, copy.dwords);
    const uint64_t jobs = MiniVmm::jobs_completed();
    REQUIRE(vmm.fence(0, 0, held) == 0);  // held for the copy
    // vrend's fence goes out while the copy still runs, as it would without us (vrend signals
    // both of its fences in one write: ours is then the newest id below the held one).
    REQUIRE(vmm.run_until([&] { return vmm.newest_global() >= passed; }));
    CHECK(vmm.newest_global() < held);
    CHECK(MiniVmm::jobs_completed() == jobs);
    REQUIRE(rvgl_emu_set_knob("RVGL_EMU_JOB_LATENCY_US", "0") == 0);
    REQUIRE(vmm.run_until([&] { return vmm.newest_global() >= held; }));
    CHECK(MiniVmm::jobs_completed() == jobs + 1);
  }
  CHECK(vmm.written_inside_create() == 0);
  virgl_renderer_context_destroy(g.ctx_id());
}

TEST_CASE(
    "a global fence with no ROCM work left is written at the VMM's next poll, not inside "
    "create_fence",
    "[global-1000]") {
  // QEMU <= 10.0 (callbacks v1) queues the fenced command in fenceq only after
  // virgl_renderer_create_fence returns, and polls right after its command batch.
  MiniVmm vmm({"qemu-10.0", 1, VIRGL_RENDERER_NO_VIRGL, false, false, 8, nullptr, false, false,
               false, false});
  REQUIRE(vmm.result() == 0);
  RocmGuest g(10, 100);
  g.start();
  for (uint32_t id = 1; id <= 20; ++id) {
    INFO("fence " << id);
    REQUIRE(vmm.fence(0, 0, id) == 0);
    CHECK(vmm.newest_global() == id - 1);
    virgl_renderer_poll();
    CHECK(vmm.newest_global() == id);
  }
  CHECK(vmm.written_inside_create() == 0);
  virgl_renderer_context_destroy(g.ctx_id());
}

TEST_CASE("a global fence waits for the work of a queue destroyed before it", "[global-1000]") {
  // QUEUE_DESTROY returns at once, its jobs still running: they were submitted ahead of the fence.
  MiniVmm vmm({"qemu-10.0", 1, VIRGL_RENDERER_NO_VIRGL, false, false, 8, nullptr, false, false,
               false, false});
  REQUIRE(vmm.result() == 0);
  RocmGuest g(10, 100);
  g.start();
  const CopyIb copy = one_copy(g);
  for (uint32_t round = 1; round <= 3; ++round) {
    INFO("round " << round);
    const uint32_t q = g.queue_create(RVGL_IP_SDMA, 1);
    REQUIRE(rvgl_emu_set_knob("RVGL_EMU_JOB_LATENCY_US", "200000") == 0);
    const uint64_t jobs = MiniVmm::jobs_completed();
    g.submit(q, copy.va, copy.dwords);
    REQUIRE(g.queue_destroy(q) == 0);
    REQUIRE(vmm.fence(0, 0, round) == 0);
    REQUIRE(vmm.run_until([&] { return vmm.newest_global() >= round; }));
    CHECK(MiniVmm::jobs_completed() == jobs + 1);  // the copy was done when the VMM was told
    REQUIRE(rvgl_emu_set_knob("RVGL_EMU_JOB_LATENCY_US", "0") == 0);
  }
  virgl_renderer_context_destroy(g.ctx_id());
}

TEST_CASE("the global fence waiter does not spin while the kernel refuses its waits",
          "[global-1000-async]") {
  // SYNCOBJ_TIMELINE_WAIT answers ENOMEM every time while a held fence's job runs for 200 ms:
  // the waiter asks again a millisecond apart (work_snapshot.h), not in a loop, and the fence
  // still goes out once the job is done.
  MiniVmm vmm({"async", 4,
               VIRGL_RENDERER_NO_VIRGL | VIRGL_RENDERER_ASYNC_FENCE_CB | VIRGL_RENDERER_THREAD_SYNC,
               false, false, 8, nullptr, false, false, false, false});
  REQUIRE(vmm.result() == 0);
  RocmGuest g(10, 100);
  g.start();
  const CopyIb copy = one_copy(g);
  const uint32_t q = g.queue_create(RVGL_IP_SDMA, 1);
  REQUIRE(rvgl_emu_set_knob("RVGL_EMU_JOB_LATENCY_US", "200000") == 0);
  rvgl_emu_reset_fault_injection();
  REQUIRE(rvgl_emu_set_knob("RVGL_EMU_FAIL", "SYNCOBJ_TIMELINE_WAIT:1+:ENOMEM") == 0);
  const uint64_t jobs = MiniVmm::jobs_completed();
  g.submit(q, copy.va, copy.dwords);
  REQUIRE(vmm.fence(0, 0, 1) == 0);
  REQUIRE(vmm.run_until([&] { return vmm.newest_global() >= 1; }));
  CHECK(MiniVmm::jobs_completed() == jobs + 1);  // the copy was done when the VMM was told
  char counts[4096];
  rvgl_emu_call_counts(counts, sizeof counts);
  rvgl_emu_reset_fault_injection();
  REQUIRE(rvgl_emu_set_knob("RVGL_EMU_JOB_LATENCY_US", "0") == 0);
  const char *const kName = "SYNCOBJ_TIMELINE_WAIT ";
  const char *line = std::strstr(counts, kName);
  const unsigned long waits = line ? std::strtoul(line + std::strlen(kName), nullptr, 10) : 0;
  INFO(counts);
  CHECK(waits > 0);     // the waiter did wait, and was refused
  CHECK(waits <= 400);  // one a millisecond for 200 ms, twice over; a spin makes thousands
  virgl_renderer_context_destroy(g.ctx_id());
}
