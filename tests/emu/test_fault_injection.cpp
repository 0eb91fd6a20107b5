// Acceptance: each fault-injection knob drives the error it names.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <thread>

#include "emu_test_support.h"
#include "support/emu_call_counts.h"
#include "support/wait_for.h"

using namespace rvgl::emu_test;
using rvgl::test::emu_call_counts;
using rvgl::test::wait_for;

namespace {

struct Ring {
  Fd fd = open_render();
  GpuBuffer buf;
  uint32_t ctx = 0;
  Ring() {
    REQUIRE(fd.get() >= 0);
    REQUIRE(buf.create(fd.get(), 64 * 1024, 0x900000) == 0);
    REQUIRE(ctx_create(fd.get(), &ctx) == 0);
  }
  int fence_job(uint32_t ctx_id, uint32_t value, uint64_t *seq) {
    std::vector<uint32_t> ib;
    sdma::fence(ib, buf.va + 4096, value);
    // Each job gets its own IB: a queued job reads its IB when it runs, not when submitted.
    return submit(fd.get(), ctx_id, AMDGPU_HW_IP_DMA, 0, place_ib(buf, 64 * value, ib),
                  ib.size() * 4, seq);
  }
};

// A Ring whose context's compute jobs write a user fence, and a bystander context on it.
struct UserFencedRing : Ring {
  GpuBuffer page;
  uint32_t bystander = 0;
  drm_amdgpu_cs_chunk_fence uf{};
  std::vector<drm_amdgpu_cs_chunk> chunks;
  UserFencedRing() {
    REQUIRE(page.create(fd.get(), 4096, 0xc000000) == 0);
    REQUIRE(ctx_create(fd.get(), &bystander) == 0);
    uf.handle = page.handle;
    chunks = {{AMDGPU_CHUNK_ID_FENCE, sizeof(uf) / 4, reinterpret_cast<uintptr_t>(&uf)}};
  }
  uint64_t user_fence() const { return *reinterpret_cast<volatile uint64_t *>(page.u8()); }
  const uint32_t *data() const { return buf.u32() + 8192 / 4; }
  // A compute job of context `c` writing slot + 1 into data()[slot].
  int write(uint32_t c, uint32_t slot, uint64_t *seq) {
    std::vector<uint32_t> ib;
    pm4::write_data(ib, buf.va + 8192 + 4 * slot, {slot + 1});
    const std::vector<drm_amdgpu_cs_chunk> none;
    return submit(fd.get(), c, AMDGPU_HW_IP_COMPUTE, 0, place_ib(buf, 256 * (slot + 1), ib),
                  ib.size() * 4, seq, c == ctx ? chunks : none);
  }
  int wait(uint32_t c, uint64_t seq, uint64_t ms = 5000) {
    return wait_cs(fd.get(), c, AMDGPU_HW_IP_COMPUTE, 0, seq, abs_timeout_ms(ms));
  }
};

}  // namespace

TEST_CASE("RVGL_EMU_FAIL fails the Nth call of a named ioctl with the errno given",
          "[fault-injection][acceptance]") {
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  uint32_t h = 0;
  SECTION("GEM_CREATE:2:ENOMEM") {
    Knob k("RVGL_EMU_FAIL", "GEM_CREATE:2:ENOMEM", "");
    REQUIRE(k.rc() == 0);
    CHECK(gem_create(fd.get(), 4096, AMDGPU_GEM_DOMAIN_GTT, 0, &h) == 0);
    CHECK(gem_create(fd.get(), 4096, AMDGPU_GEM_DOMAIN_GTT, 0, &h) == -ENOMEM);
    CHECK(gem_create(fd.get(), 4096, AMDGPU_GEM_DOMAIN_GTT, 0, &h) == 0);
  }
  SECTION("N+ keeps failing, and several rules combine") {
    Knob k("RVGL_EMU_FAIL", "CTX:1+:EBUSY,INFO:1:EIO", "");
    REQUIRE(k.rc() == 0);
    uint32_t ctx;
    CHECK(ctx_create(fd.get(), &ctx) == -EBUSY);
    CHECK(ctx_create(fd.get(), &ctx) == -EBUSY);
    uint32_t v;
    CHECK(query_info(fd.get(), AMDGPU_INFO_ACCEL_WORKING, &v, 4) == -EIO);
    CHECK(query_info(fd.get(), AMDGPU_INFO_ACCEL_WORKING, &v, 4) == 0);
  }
  SECTION("OPEN and MMAP name the open of a node and the mmap of a device fd") {
    Knob k("RVGL_EMU_FAIL", "OPEN:1:ENOENT,MMAP:1:ENOMEM", "");
    errno = 0;
    CHECK(open("/dev/dri/renderD128", O_RDWR) == -1);
    CHECK(errno == ENOENT);
    Fd again = open_render();
    CHECK(again.get() >= 0);
    REQUIRE(gem_create(fd.get(), 4096, AMDGPU_GEM_DOMAIN_GTT, 0, &h) == 0);
    errno = 0;
    CHECK(gem_cpu_map(fd.get(), h, 4096) == nullptr);
    CHECK(errno == ENOMEM);
    void *p = gem_cpu_map(fd.get(), h, 4096);
    CHECK(p != nullptr);
    munmap(p, 4096);
  }
  SECTION("counted calls: every thread's, and the counting thread's own apart") {
    using Counts = std::map<std::string, uint64_t>;
    uint32_t v;
    rvgl_emu_count_calls();
    REQUIRE(query_info(fd.get(), AMDGPU_INFO_ACCEL_WORKING, &v, 4) == 0);
    int other_rc = 0;  // Catch's assertions are for the test's thread only
    std::thread other([&] {
      uint32_t w;
      for (int i = 0; i < 2; ++i)
        other_rc |= query_info(fd.get(), AMDGPU_INFO_ACCEL_WORKING, &w, 4);
      other_rc |= gem_create(fd.get(), 4096, AMDGPU_GEM_DOMAIN_GTT, 0, &h);
    });
    other.join();
    REQUIRE(other_rc == 0);
    CHECK(emu_call_counts() == Counts{{"GEM_CREATE", 1}, {"INFO", 3}});
    CHECK(emu_call_counts(rvgl_emu_counting_thread_call_counts) == Counts{{"INFO", 1}});
    // A rule counts from zero again, the counting thread's calls too.
    REQUIRE(rvgl_emu_set_knob("RVGL_EMU_FAIL", "CTX:9:EIO") == 0);
    REQUIRE(query_info(fd.get(), AMDGPU_INFO_ACCEL_WORKING, &v, 4) == 0);
    CHECK(emu_call_counts(rvgl_emu_counting_thread_call_counts) == Counts{{"INFO", 1}});
    rvgl_emu_reset_fault_injection();
    CHECK(emu_call_counts(rvgl_emu_counting_thread_call_counts).empty());
  }
  SECTION("an unknown errno or a malformed rule is refused") {
    CHECK(rvgl_emu_set_knob("RVGL_EMU_FAIL", "GEM_CREATE:0:ENOMEM") == -EINVAL);
    CHECK(rvgl_emu_set_knob("RVGL_EMU_FAIL", "GEM_CREATE:1:EWHAT") == -EINVAL);
    CHECK(rvgl_emu_set_knob("RVGL_EMU_NO_SUCH_KNOB", "1") == -ENOENT);
  }
  rvgl_emu_reset_fault_injection();
  CHECK(gem_create(fd.get(), 4096, AMDGPU_GEM_DOMAIN_GTT, 0, &h) == 0);
}

TEST_CASE("RVGL_EMU_HANG_JOB hangs a context's Nth job until the lockup timeout",
          "[fault-injection][acceptance]") {
  Knob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "150", "2000");
  Knob hang("RVGL_EMU_HANG_JOB", "2", "0");
  Ring r;
  uint32_t bystander = 0;
  REQUIRE(ctx_create(r.fd.get(), &bystander) == 0);
  const auto before = counters();
  uint64_t s1, s2;
  REQUIRE(r.fence_job(r.ctx, 1, &s1) == 0);
  REQUIRE(r.fence_job(r.ctx, 2, &s2) == 0);
  CHECK(wait_cs(r.fd.get(), r.ctx, AMDGPU_HW_IP_DMA, 0, s1, abs_timeout_ms(5000)) == 0);
  CHECK(wait_cs(r.fd.get(), r.ctx, AMDGPU_HW_IP_DMA, 0, s2, abs_timeout_ms(30)) == 1);  // stuck
  const uint64_t t0 = now_ns();
  CHECK(wait_cs(r.fd.get(), r.ctx, AMDGPU_HW_IP_DMA, 0, s2, abs_timeout_ms(5000)) == -ETIME);
  CHECK(now_ns() - t0 < 4000000000ull);
  CHECK(r.buf.u32()[1024] == 1);
  CHECK(ctx_state2(r.fd.get(), r.ctx) ==
        (AMDGPU_CTX_QUERY2_FLAGS_GUILTY | AMDGPU_CTX_QUERY2_FLAGS_RESET));
  // The reset that cleared the hang is seen by every context, innocent ones included.
  CHECK(ctx_state2(r.fd.get(), bystander) == AMDGPU_CTX_QUERY2_FLAGS_RESET);
  CHECK(counters().gpu_resets == before.gpu_resets + 1);
}

TEST_CASE("RVGL_EMU_FULL_RESET_US: guilty and counted that long before the hung job signals",
          "[fault-injection]") {
  Knob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "50", "2000");
  Knob hang("RVGL_EMU_HANG_JOB", "2", "0");
  Knob reset("RVGL_EMU_FULL_RESET_US", "300000", "0");
  UserFencedRing r;
  uint64_t seq[2] = {}, other = 0;
  REQUIRE(r.write(r.ctx, 0, &seq[0]) == 0);
  REQUIRE(r.write(r.ctx, 1, &seq[1]) == 0);  // hangs: the GPU is reset
  CHECK(r.wait(r.ctx, seq[0]) == 0);
  constexpr uint64_t kGuiltyReset = AMDGPU_CTX_QUERY2_FLAGS_GUILTY | AMDGPU_CTX_QUERY2_FLAGS_RESET;
  REQUIRE(wait_for([&] { return ctx_state2(r.fd.get(), r.ctx) == kGuiltyReset; }));
  const uint64_t marked = now_ns();
  // The reset is under way: the hung job has not signalled, and another context's work on
  // another ring does not start until it is over.
  CHECK(r.wait(r.ctx, seq[1], 0) == 1);
  CHECK(ctx_state2(r.fd.get(), r.bystander) == AMDGPU_CTX_QUERY2_FLAGS_RESET);
  REQUIRE(r.fence_job(r.bystander, 7, &other) == 0);
  CHECK(wait_cs(r.fd.get(), r.bystander, AMDGPU_HW_IP_DMA, 0, other, abs_timeout_ms(5000)) == 0);
  // 300 ms from the marking; the 1 ms polls above saw it at most a little late.
  CHECK(now_ns() - marked >= 200'000'000ull);
  CHECK(r.wait(r.ctx, seq[1]) == -ETIME);
  CHECK(now_ns() - marked >= 200'000'000ull);
  CHECK(r.buf.u32()[1024] == 7);
  CHECK(r.data()[1] == 0);
  // A guilty context submits no more (amdgpu_cs_parser_init()).
  uint64_t later = 0;
  CHECK(r.write(r.ctx, 2, &later) == -ECANCELED);
}

TEST_CASE("RVGL_EMU_SOFT_RECOVER_JOB: the timeout's soft recovery kills a job, the ring goes on",
          "[fault-injection][acceptance]") {
  Knob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "100", "2000");
  Knob soft("RVGL_EMU_SOFT_RECOVER_JOB", "2", "0");
  UserFencedRing r;
  const auto before = counters();
  uint64_t seq[4] = {};
  for (uint32_t i = 0; i < 3; ++i)
    REQUIRE(r.write(r.ctx, i, &seq[i]) == 0);
  CHECK(r.wait(r.ctx, seq[0]) == 0);
  CHECK(r.wait(r.ctx, seq[1], 20) == 1);
  CHECK(r.wait(r.ctx, seq[1]) == -ENODATA);
  CHECK(r.wait(r.ctx, seq[2]) == 0);
  // The killed job wrote nothing of its own, and its end-of-job user fence like any other.
  const uint32_t *data = r.data();
  CHECK(data[0] == 1);
  CHECK(data[1] == 0);
  CHECK(data[2] == 3);
  CHECK(r.user_fence() == seq[2]);
  // The reset counter moved (every context sees RESET), nobody is guilty, the context goes on.
  CHECK(ctx_state2(r.fd.get(), r.ctx) == AMDGPU_CTX_QUERY2_FLAGS_RESET);
  CHECK(ctx_state2(r.fd.get(), r.bystander) == AMDGPU_CTX_QUERY2_FLAGS_RESET);
  CHECK(counters().jobs_failed == before.jobs_failed + 1);
  REQUIRE(r.write(r.ctx, 3, &seq[3]) == 0);
  CHECK(r.wait(r.ctx, seq[3]) == 0);
  CHECK(data[3] == 4);

  SECTION("RVGL_EMU_RECOVERY_COUNT_DELAY_US: the reset is counted that long after the signal") {
    Knob late("RVGL_EMU_RECOVERY_COUNT_DELAY_US", "300000", "0");
    uint32_t fresh = 0;
    REQUIRE(ctx_create(r.fd.get(), &fresh) == 0);
    uint64_t s1 = 0, s2 = 0;
    REQUIRE(r.write(fresh, 5, &s1) == 0);
    REQUIRE(r.write(fresh, 6, &s2) == 0);  // killed
    CHECK(r.wait(fresh, s2) == -ENODATA);
    const uint64_t signalled = now_ns();
    CHECK(ctx_state2(r.fd.get(), fresh) == 0);  // not counted yet
    CHECK(wait_for([&] { return ctx_state2(r.fd.get(), fresh) != 0; }));
    CHECK(now_ns() - signalled >= 250'000'000ull);
    CHECK(ctx_state2(r.fd.get(), fresh) == AMDGPU_CTX_QUERY2_FLAGS_RESET);
  }
  SECTION("RVGL_EMU_RECOVERY_COUNT_AT_QUERY: the next QUERY_STATE counts it, after its answer") {
    Knob at_query("RVGL_EMU_RECOVERY_COUNT_AT_QUERY", "1", "0");
    uint32_t fresh = 0, probe = 0;
    REQUIRE(ctx_create(r.fd.get(), &fresh) == 0);
    REQUIRE(ctx_create(r.fd.get(), &probe) == 0);
    uint64_t s1 = 0, s2 = 0;
    REQUIRE(r.write(fresh, 5, &s1) == 0);
    REQUIRE(r.write(fresh, 6, &s2) == 0);  // killed
    CHECK(r.wait(fresh, s2) == -ENODATA);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK(ctx_state2(r.fd.get(), fresh) == 0);  // a QUERY_STATE2 does not count it
    CHECK(ctx_state1(r.fd.get(), probe) == AMDGPU_CTX_NO_RESET);            // answered without it
    CHECK(ctx_state2(r.fd.get(), fresh) == AMDGPU_CTX_QUERY2_FLAGS_RESET);  // counted since
    CHECK(ctx_state1(r.fd.get(), probe) == AMDGPU_CTX_UNKNOWN_RESET);
    CHECK(ctx_state1(r.fd.get(), probe) == AMDGPU_CTX_NO_RESET);
  }
  SECTION("an SDMA ring has no soft recovery: the GPU is reset and the context blamed") {
    uint64_t s1 = 0, s2 = 0;
    uint32_t fresh = 0;
    REQUIRE(ctx_create(r.fd.get(), &fresh) == 0);
    REQUIRE(r.fence_job(fresh, 1, &s1) == 0);
    REQUIRE(r.fence_job(fresh, 2, &s2) == 0);
    CHECK(wait_cs(r.fd.get(), fresh, AMDGPU_HW_IP_DMA, 0, s2, abs_timeout_ms(5000)) == -ETIME);
    CHECK((ctx_state2(r.fd.get(), fresh) & AMDGPU_CTX_QUERY2_FLAGS_GUILTY) != 0);
  }
}

TEST_CASE("RVGL_EMU_RING_RESET_JOB: a hang soft recovery cannot end resets only its queue",
          "[fault-injection][acceptance]") {
  Knob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "100", "2000");
  Knob ring_reset("RVGL_EMU_RING_RESET_JOB", "2", "0");
  UserFencedRing r;
  const auto before = counters();
  const uint32_t *data = r.data();
  uint64_t seq[4] = {}, other = 0;

  SECTION("the job behind it on the ring is its context's: cancelled; later work runs") {
    for (uint32_t i = 0; i < 4; ++i)
      REQUIRE(r.write(r.ctx, i, &seq[i]) == 0);
    REQUIRE(r.write(r.bystander, 4, &other) == 0);
    CHECK(r.wait(r.ctx, seq[0]) == 0);
    CHECK(r.wait(r.ctx, seq[1], 20) == 1);  // stuck until the lockup timeout
    CHECK(r.wait(r.ctx, seq[1]) == -ETIME);
    CHECK(r.wait(r.ctx, seq[2]) == -ECANCELED);
    CHECK(r.wait(r.ctx, seq[3]) == 0);
    CHECK(r.wait(r.bystander, other) == 0);
    CHECK(data[0] == 1);
    CHECK(data[1] == 0);
    CHECK(data[2] == 0);
    CHECK(data[3] == 4);
    CHECK(data[4] == 5);
    CHECK(r.user_fence() == seq[3]);
    CHECK(counters().jobs_failed == before.jobs_failed + 2);
  }
  SECTION("the job behind it is another context's: re-emitted, it runs") {
    REQUIRE(r.write(r.ctx, 0, &seq[0]) == 0);
    REQUIRE(r.write(r.ctx, 1, &seq[1]) == 0);
    REQUIRE(r.write(r.bystander, 4, &other) == 0);
    CHECK(r.wait(r.ctx, seq[1]) == -ETIME);
    CHECK(r.wait(r.bystander, other) == 0);
    CHECK(r.user_fence() == seq[0]);  // the hung job's commands never ran again
    CHECK(data[1] == 0);
    CHECK(data[4] == 5);
    CHECK(counters().jobs_failed == before.jobs_failed + 1);
    // Nothing is guilty: the context keeps submitting.
    REQUIRE(r.write(r.ctx, 2, &seq[2]) == 0);
    CHECK(r.wait(r.ctx, seq[2]) == 0);
    CHECK(data[2] == 3);
    CHECK(r.user_fence() == seq[2]);
  }
  SECTION("an SDMA queue is reset the same way") {
    uint64_t s1 = 0, s2 = 0, s3 = 0;
    uint32_t fresh = 0;
    REQUIRE(ctx_create(r.fd.get(), &fresh) == 0);
    REQUIRE(r.fence_job(fresh, 1, &s1) == 0);
    REQUIRE(r.fence_job(fresh, 2, &s2) == 0);
    CHECK(wait_cs(r.fd.get(), fresh, AMDGPU_HW_IP_DMA, 0, s2, abs_timeout_ms(5000)) == -ETIME);
    CHECK(r.buf.u32()[1024] == 1);
    REQUIRE(r.fence_job(fresh, 3, &s3) == 0);
    CHECK(wait_cs(r.fd.get(), fresh, AMDGPU_HW_IP_DMA, 0, s3, abs_timeout_ms(5000)) == 0);
    CHECK(r.buf.u32()[1024] == 3);
    // Counted after the hung job's fence signalled, before the ring ran anything more.
    CHECK(ctx_state2(r.fd.get(), fresh) == AMDGPU_CTX_QUERY2_FLAGS_RESET);
  }
  // The reset counter moved (every context sees RESET); it was no GPU reset and nobody is guilty.
  CHECK(ctx_state2(r.fd.get(), r.ctx) == AMDGPU_CTX_QUERY2_FLAGS_RESET);
  CHECK(ctx_state2(r.fd.get(), r.bystander) == AMDGPU_CTX_QUERY2_FLAGS_RESET);
  CHECK(counters().gpu_resets == before.gpu_resets);
}

TEST_CASE("RVGL_EMU_RESET_JOB loses a job to an innocent reset, VRAM too if asked",
          "[fault-injection][acceptance]") {
  Knob reset("RVGL_EMU_RESET_JOB", "1", "0");
  Knob lost("RVGL_EMU_RESET_VRAM_LOST", "1", "0");
  Ring r;
  uint32_t lost_counter_before = 0, lost_counter_after = 0;
  REQUIRE(query_info(r.fd.get(), AMDGPU_INFO_VRAM_LOST_COUNTER, &lost_counter_before, 4) == 0);
  uint64_t seq;
  REQUIRE(r.fence_job(r.ctx, 5, &seq) == 0);
  CHECK(wait_cs(r.fd.get(), r.ctx, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == -ECANCELED);
  CHECK(ctx_state2(r.fd.get(), r.ctx) ==
        (AMDGPU_CTX_QUERY2_FLAGS_RESET | AMDGPU_CTX_QUERY2_FLAGS_VRAMLOST));
  REQUIRE(query_info(r.fd.get(), AMDGPU_INFO_VRAM_LOST_COUNTER, &lost_counter_after, 4) == 0);
  CHECK(lost_counter_after == lost_counter_before + 1);
  // A context from before the loss submits nothing more; a new one does.
  CHECK(r.fence_job(r.ctx, 6, &seq) == -ECANCELED);
  uint32_t fresh = 0;
  REQUIRE(ctx_create(r.fd.get(), &fresh) == 0);
  rvgl_emu_set_knob("RVGL_EMU_RESET_JOB", "0");
  REQUIRE(r.fence_job(fresh, 7, &seq) == 0);
  CHECK(wait_cs(r.fd.get(), fresh, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == 0);
  CHECK(r.buf.u32()[1024] == 7);
}

TEST_CASE("RVGL_EMU_FAULT_VA makes a mapped address fault", "[fault-injection][acceptance]") {
  // About the stopping behaviour (amdgpu.vm_fault_stop=2); the default is
  // test_vm_fault_default.cpp.
  Knob stop("RVGL_EMU_VM_FAULT_STOP", "2", "0");
  Ring r;
  const std::string va = std::to_string(r.buf.va + 8192);
  Knob k("RVGL_EMU_FAULT_VA", va, "");
  std::vector<uint32_t> ib;
  sdma::fence(ib, r.buf.va + 8192 + 16, 1);
  uint64_t seq;
  REQUIRE(submit(r.fd.get(), r.ctx, AMDGPU_HW_IP_DMA, 0, place_ib(r.buf, 0, ib), ib.size() * 4,
                 &seq) == 0);
  CHECK(wait_cs(r.fd.get(), r.ctx, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == -ETIME);
  CHECK(vm_fault(r.fd.get()).addr == r.buf.va + 8192);
}

TEST_CASE("RVGL_EMU_JOB_LATENCY_US delays every job", "[fault-injection]") {
  Knob k("RVGL_EMU_JOB_LATENCY_US", "50000", "0");
  Ring r;
  uint64_t seq;
  const uint64_t t0 = now_ns();
  REQUIRE(r.fence_job(r.ctx, 1, &seq) == 0);
  CHECK(wait_cs(r.fd.get(), r.ctx, AMDGPU_HW_IP_DMA, 0, seq, 0) == 1);  // not done at once
  CHECK(wait_cs(r.fd.get(), r.ctx, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == 0);
  CHECK(now_ns() - t0 >= 50000000ull);
}

TEST_CASE("RVGL_EMU_ENTITY_ERRORS: an entity whose last popped job failed answers that error",
          "[fault-injection][acceptance]") {
  // Linux 6.5+: amdgpu_ctx_get_entity() returns drm_sched_entity_error(), the error of the
  // entity's last_scheduled job, to CS and WAIT_CS whatever job they name; amdgpu_job_prepare_job()
  // gives it to every job popped after. A job the scheduler had already put on the ring behind
  // the failing one (2 per ring) was prepared before the failure.
  Knob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "100", "2000");
  Knob entity("RVGL_EMU_ENTITY_ERRORS", "1", "0");
  REQUIRE(entity.rc() == 0);
  uint64_t seq[4] = {}, other = 0, later = 0;

  SECTION("soft recovery of the entity's last job: its error from then on, for every ioctl") {
    Knob soft("RVGL_EMU_SOFT_RECOVER_JOB", "2", "0");
    UserFencedRing r;
    REQUIRE(r.write(r.ctx, 0, &seq[0]) == 0);
    REQUIRE(r.write(r.ctx, 1, &seq[1]) == 0);  // killed
    CHECK(r.wait(r.ctx, seq[1]) == -ENODATA);
    CHECK(r.wait(r.ctx, seq[0]) == -ENODATA);  // job 1 ran, but the entity answers
    CHECK(r.data()[0] == 1);
    CHECK(r.user_fence() == seq[1]);  // the killed job wrote its user fence as any job
    CHECK(r.write(r.ctx, 2, &later) == -ENODATA);
    REQUIRE(r.write(r.bystander, 3, &other) == 0);  // another context is not touched
    CHECK(r.wait(r.bystander, other) == 0);
  }
  SECTION(
      "soft recovery with the next job already on the ring: that job runs, the entity is clear") {
    Knob soft("RVGL_EMU_SOFT_RECOVER_JOB", "2", "0");
    UserFencedRing r;
    for (uint32_t i = 0; i < 3; ++i)
      REQUIRE(r.write(r.ctx, i, &seq[i]) == 0);
    CHECK(r.wait(r.ctx, seq[2]) == 0);
    CHECK(r.data()[2] == 3);
    CHECK(r.wait(r.ctx, seq[0]) == 0);
    REQUIRE(r.write(r.ctx, 3, &seq[3]) == 0);
    CHECK(r.wait(r.ctx, seq[3]) == 0);
    CHECK(r.data()[3] == 4);
  }
  SECTION("a ring reset that cancels the job behind: -ECANCELED for the entity, later jobs too") {
    Knob ring_reset("RVGL_EMU_RING_RESET_JOB", "2", "0");
    UserFencedRing r;
    for (uint32_t i = 0; i < 4; ++i)
      REQUIRE(r.write(r.ctx, i, &seq[i]) == 0);
    // A wait under way when the job failed sees the job's own error; once the job behind it was
    // cancelled (the entity's last popped), every later ioctl gets -ECANCELED, the hung job's too.
    CHECK(r.wait(r.ctx, seq[1]) == -ETIME);
    CHECK(r.wait(r.ctx, seq[3]) == -ECANCELED);
    CHECK(r.wait(r.ctx, seq[1]) == -ECANCELED);
    CHECK(r.wait(r.ctx, seq[0]) == -ECANCELED);
    CHECK(r.data()[0] == 1);
    CHECK(r.data()[1] == 0);
    CHECK(r.data()[2] == 0);
    CHECK(r.data()[3] == 0);  // prepared after the failure: never run
    CHECK(r.user_fence() == seq[0]);
    CHECK(r.write(r.ctx, 4, &later) == -ECANCELED);
  }
  SECTION("a ring reset of the entity's last job: -ETIME from then on") {
    Knob ring_reset("RVGL_EMU_RING_RESET_JOB", "2", "0");
    UserFencedRing r;
    REQUIRE(r.write(r.ctx, 0, &seq[0]) == 0);
    REQUIRE(r.write(r.ctx, 1, &seq[1]) == 0);  // hangs
    REQUIRE(r.write(r.bystander, 4, &other) == 0);
    CHECK(r.wait(r.ctx, seq[1]) == -ETIME);
    CHECK(r.wait(r.bystander, other) == 0);
    CHECK(r.wait(r.ctx, seq[0]) == -ETIME);
    CHECK(r.write(r.ctx, 2, &later) == -ETIME);
  }
  SECTION("0 (a kernel before 6.5): each job answers its own error") {
    Knob old("RVGL_EMU_ENTITY_ERRORS", "0", "0");
    Knob ring_reset("RVGL_EMU_RING_RESET_JOB", "2", "0");
    UserFencedRing r;
    REQUIRE(r.write(r.ctx, 0, &seq[0]) == 0);
    REQUIRE(r.write(r.ctx, 1, &seq[1]) == 0);  // hangs
    CHECK(r.wait(r.ctx, seq[1]) == -ETIME);
    CHECK(r.wait(r.ctx, seq[0]) == 0);
    REQUIRE(r.write(r.ctx, 2, &later) == 0);
    CHECK(r.wait(r.ctx, later) == 0);
  }
}
