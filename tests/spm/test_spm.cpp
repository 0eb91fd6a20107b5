// Issue 6: SPM arbitration, streaming into guest memory, never blocking the context.
#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "robustness/robust_support.h"
#include "spm/spm_reaper.h"
#include "spm_decode.h"

using namespace rvgl;
using namespace rvgl::test;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint32_t kSpmRing = 7;

// SPM_ACQUIRE as it comes, whatever a released session still finishes on the reaper.
int32_t acquire_now(ContextHarness &h, uint32_t ring = kSpmRing) {
  rvgl_req_spm_acquire r{};
  r.ring_idx = ring;
  return h.call<rvgl_rsp_spm_acquire>(RVGL_CMD_SPM_ACQUIRE, r).hdr.result;
}

int32_t acquire(ContextHarness &h, uint32_t ring = kSpmRing) {
  SpmReaper::instance().drain();  // SPM released by an earlier test's context is free again
  return acquire_now(h, ring);
}

int32_t release(ContextHarness &h) {
  rvgl_req_spm_release r{};
  return h.call<rvgl_rsp_spm_release>(RVGL_CMD_SPM_RELEASE, r).hdr.result;
}

// Sends SET_DEST into a slot of its own and returns (seqno, slot offset) to wait on.
struct Pending {
  uint32_t seqno, off;
};
Pending set_dest(ContextHarness &h, uint32_t bo, uint64_t offset, uint64_t size, uint32_t timeout) {
  rvgl_req_spm_set_dest r{};
  r.bo = bo;
  r.offset = offset;
  r.size = size;
  r.timeout_ms = timeout;
  const uint32_t seqno = h.next_seqno();
  const uint32_t off = RVGL_RSP_AREA_SIZE - 64;  // away from the harness's rotating slots
  r.hdr = {RVGL_CMD_SPM_SET_DEST, sizeof(r), seqno, off};
  REQUIRE(h.ctx().submit_cmd({reinterpret_cast<const uint8_t *>(&r), sizeof(r)}) == 0);
  return {seqno, off};
}

bool wait_rsp(ContextHarness &h, const Pending &p, rvgl_rsp_spm_set_dest *out, int ms = 5000) {
  return wait_for(
      [&] {
        std::memcpy(out, h.shmem() + RVGL_RSP_AREA_OFFSET + p.off, sizeof(*out));
        return __atomic_load_n(&out->hdr.seqno, __ATOMIC_ACQUIRE) == p.seqno;
      },
      ms);
}

bool has_spm(ContextHarness &h) {
  return (h.capset().features & RVGL_FEATURE_SPM) != 0;
}

}  // namespace

TEST_CASE("SPM: one owner at a time; released by RELEASE or destroy", "[spm]") {
  auto a = std::make_unique<ContextHarness>(test_config(), false, 1);
  ContextHarness b(test_config(), false, 2);
  a->create_shmem();
  b.create_shmem();
  REQUIRE(has_spm(b));
  REQUIRE(acquire(*a) == 0);
  CHECK(acquire(*a) == -EALREADY);
  CHECK(acquire(b) == -EBUSY);
  REQUIRE(release(*a) == 0);
  CHECK(release(*a) == -EPERM);
  SpmReaper::instance().drain();
  REQUIRE(acquire(b) == 0);
  CHECK(acquire(*a) == -EBUSY);
  REQUIRE(release(b) == 0);
  SpmReaper::instance().drain();

  REQUIRE(acquire(*a) == 0);
  CHECK(acquire(b) == -EBUSY);
  a.reset();  // the owner goes away
  SpmReaper::instance().drain();
  CHECK(acquire(b) == 0);
}

TEST_CASE("SPM: released with nothing in the kernel, it is free for another context at once",
          "[spm]") {
  // proto/PROTOCOL.md, SPM_ACQUIRE: -EBUSY after a release only while a SET_DEST is still
  // blocked in the kernel. The reaper is not drained here: each ACQUIRE must succeed as it comes.
  ContextHarness a(test_config(), true, 1), b(test_config(), false, 2);
  a.create_shmem();
  b.create_shmem();
  REQUIRE(has_spm(a));
  auto buf_a = a.mapped_bo(64 * 1024), buf_b = b.mapped_bo(64 * 1024);
  SpmReaper::instance().drain();
  for (int round = 0; round < 200; ++round) {
    INFO("round " << round);
    ContextHarness &h = round % 2 ? b : a;
    const auto &buf = round % 2 ? buf_b : buf_a;
    REQUIRE(acquire_now(h) == 0);
    // A stream started (its SET_DEST answered), and half the time stopped again before the
    // release; else the release stops it (the kernel's RELEASE ends the stream).
    rvgl_rsp_spm_set_dest rsp;
    REQUIRE(wait_rsp(h, set_dest(h, buf.bo, 0, 64 * 1024, 0), &rsp));
    REQUIRE(rsp.hdr.result == 0);
    if (round % 4 < 2) {
      REQUIRE(wait_rsp(h, set_dest(h, 0, 0, 0, 0), &rsp));
      REQUIRE(rsp.hdr.result == 0);
    }
    REQUIRE(release(h) == 0);
  }
  SpmReaper::instance().drain();
}

TEST_CASE("SPM: a blocking SET_DEST does not delay other commands", "[spm]") {
  ScopedKnob rate("RVGL_EMU_SPM_RATE_HZ", "10", "1000");  // a slow stream: buffers never fill
  ContextHarness h(test_config(), true);
  h.create_shmem();
  auto buf = h.mapped_bo(64 * 1024);
  REQUIRE(acquire(h) == 0);
  const auto t0 = Clock::now();
  set_dest(h, buf.bo, 0, 64 * 1024, 0);  // starts the stream at once
  const Pending p = set_dest(h, buf.bo, 0, 64 * 1024, 500);
  rvgl_req_nop nop{};
  CHECK(h.call<rvgl_rsp_nop>(RVGL_CMD_NOP, nop).hdr.result == 0);
  const auto nop_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  CHECK(nop_ms < 250);
  rvgl_rsp_spm_set_dest rsp;
  CHECK_FALSE(wait_rsp(h, p, &rsp, 100));  // still blocked in the kernel
  REQUIRE(wait_rsp(h, p, &rsp, 3000));
  const auto set_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  CHECK(rsp.hdr.result == 0);
  CHECK(set_ms >= 450);
  CHECK(rsp.timeout_left_ms == 0);
  // The SPM ring's fence retires when the SET_DESTs before it are done.
  REQUIRE(h.fence(kSpmRing, 1) == 0);
  CHECK(h.wait_fence(kSpmRing, 1));
}

TEST_CASE("SPM: the SPM ring's fences retire when the kernel refuses the host's timeline signal",
          "[spm]") {
  // Nothing waits on the SPM timeline through the kernel: the host knows the SET_DEST is done,
  // and a fence waiting for it must not hang because the syncobj could not be told.
  const bool async = GENERATE(true, false);
  ContextHarness h(test_config(), async);
  h.create_shmem();
  auto buf = h.mapped_bo(64 * 1024);
  REQUIRE(acquire(h) == 0);
  ScopedKnob fail("RVGL_EMU_FAIL", "SYNCOBJ_TIMELINE_SIGNAL:1+:ENOMEM", "");
  for (uint32_t i = 1; i <= 3; ++i) {
    const Pending p = set_dest(h, buf.bo, 0, 64 * 1024, 0);
    rvgl_rsp_spm_set_dest rsp;
    REQUIRE(wait_rsp(h, p, &rsp));
    CHECK(rsp.hdr.result == 0);
    REQUIRE(h.fence(kSpmRing, i) == 0);
    CHECK(h.wait_fence(kSpmRing, i));
  }
  CHECK(h.fences().size() == 3);
}

TEST_CASE("SPM: samples stream into guest memory with per-XCC headers", "[spm]") {
  ScopedKnob rate("RVGL_EMU_SPM_RATE_HZ", "20000", "1000");
  ContextHarness h;
  h.create_shmem();
  const uint32_t xccs = h.capset().num_xcc;
  REQUIRE(xccs >= 1);
  constexpr uint64_t kSize = 64 * 1024, kGuard = 4096;
  auto blob = h.mapped_bo(kSize + 2 * kGuard);
  std::memset(blob.ptr(), 0xee, kSize + 2 * kGuard);
  REQUIRE(acquire(h) == 0);
  set_dest(h, blob.bo, kGuard, kSize, 0);
  // Wait for the first buffer to fill, then retire it by giving the stream another one.
  auto other = h.mapped_bo(kSize);
  const Pending p = set_dest(h, other.bo, 0, kSize, 2000);
  rvgl_rsp_spm_set_dest rsp;
  REQUIRE(wait_rsp(h, p, &rsp));
  REQUIRE(rsp.hdr.result == 0);
  CHECK(rsp.bytes_copied > 0);

  spm::SpmRecordingHeader layout{};
  layout.num_xcc = xccs;
  layout.global_lines = 2;
  layout.se_lines = 1;
  layout.shader_engines = h.capset().num_shader_engines / xccs;
  std::vector<spm::Sample> samples;
  spm::DecodeStats stats;
  std::string err;
  REQUIRE(spm::decode_buffer(layout, {blob.ptr() + kGuard, kSize}, &samples, &stats, &err));
  CHECK(stats.slices == xccs);
  CHECK(stats.bytes == rsp.bytes_copied);
  CHECK(stats.samples > 0);
  CHECK(stats.timestamp_regressions == 0);
  const uint32_t slice = static_cast<uint32_t>(kSize / xccs) & ~31u;
  for (uint32_t x = 0; x < xccs; ++x) {
    rvgl_spm_buffer_header hdr;
    std::memcpy(&hdr, blob.ptr() + kGuard + x * slice, sizeof(hdr));
    CHECK(hdr.version >> 24 == 1);
  }
  // Nothing outside [offset, offset + size) of the destination was written.
  size_t outside = 0;
  for (uint64_t i = 0; i < kGuard; ++i) {
    outside += blob.ptr()[i] != 0xee;
    outside += blob.ptr()[kGuard + kSize + i] != 0xee;
  }
  CHECK(outside == 0);
}

TEST_CASE("SPM: a guest that stops draining sees data loss", "[spm]") {
  ScopedKnob rate("RVGL_EMU_SPM_RATE_HZ", "200000", "1000");
  ScopedKnob ring("RVGL_EMU_SPM_RING_KB", "4", "64");
  ContextHarness h;
  h.create_shmem();
  auto a = h.mapped_bo(8192), b = h.mapped_bo(8192);
  REQUIRE(acquire(h) == 0);
  set_dest(h, a.bo, 0, 8192, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // nobody drains
  const Pending p = set_dest(h, b.bo, 0, 8192, 0);
  rvgl_rsp_spm_set_dest rsp;
  REQUIRE(wait_rsp(h, p, &rsp));
  CHECK(rsp.has_data_loss > 0);
  bool event = false;
  REQUIRE(wait_for([&] {
    for (const auto &e : read_events(h))
      event |= e.type == RVGL_EVENT_SPM_DATA_LOSS;
    return event;
  }));
}

TEST_CASE("SPM: a destination unreferenced while streaming stays valid until retired", "[spm]") {
  ScopedKnob rate("RVGL_EMU_SPM_RATE_HZ", "20000", "1000");
  ContextHarness h;
  h.create_shmem();
  auto a = h.mapped_bo(16384);
  auto b = h.mapped_bo(16384);
  REQUIRE(acquire(h) == 0);
  // Streaming into `a` once the SPM worker has handed it to the kernel (its response is written
  // then): under a loaded machine the worker may run late, and the stream's bytes are counted by
  // the time it really ran, not by the time this thread slept.
  const Pending first = set_dest(h, a.bo, 0, 16384, 0);
  rvgl_rsp_spm_set_dest first_rsp;
  REQUIRE(wait_rsp(h, first, &first_rsp));
  REQUIRE(first_rsp.hdr.result == 0);
  // The guest drops everything naming the destination while the kernel writes into it.
  REQUIRE(h.bo_free(a.bo) == 0);
  h.ctx().detach_resource(a.res_id);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const Pending p = set_dest(h, b.bo, 0, 16384, 0);
  rvgl_rsp_spm_set_dest rsp;
  REQUIRE(wait_rsp(h, p, &rsp));
  CHECK(rsp.hdr.result == 0);
  CHECK(rsp.bytes_copied > 0);  // written into memory that was still alive (ASan would object)
  // Bad destinations are refused.
  rvgl_req_spm_set_dest bad{};
  bad.bo = b.bo;
  bad.offset = 16384 - 32;
  bad.size = 64;
  CHECK(h.call<rvgl_rsp_spm_set_dest>(RVGL_CMD_SPM_SET_DEST, bad).hdr.result == -EINVAL);
  bad.offset = 0;
  bad.size = 33;
  CHECK(h.call<rvgl_rsp_spm_set_dest>(RVGL_CMD_SPM_SET_DEST, bad).hdr.result == -EINVAL);
  bad.size = 64;
  bad.bo = 999;
  CHECK(h.call<rvgl_rsp_spm_set_dest>(RVGL_CMD_SPM_SET_DEST, bad).hdr.result == -ENOENT);
}

namespace {

// The VMM process's mappings of emulated kernel objects (memfds named rvgl-bo), as listed in
// /proc/self/maps: each one is a VMA of vm.max_map_count, which the whole process shares.
size_t bo_mappings() {
  FILE *maps = std::fopen("/proc/self/maps", "re");
  REQUIRE(maps);
  size_t n = 0;
  char line[4096];
  while (std::fgets(line, sizeof line, maps))
    if (std::strstr(line, "rvgl-bo")) ++n;
  std::fclose(maps);
  return n;
}

}  // namespace

TEST_CASE("SPM: destinations leave no host mapping behind once retired", "[spm]") {
  // A guest that names many BOs once each must not leave the VMM process a mapping for every
  // one: the host kept a BO's CPU mapping for the object's life, and contexts taking turns on
  // the SPM could use up the process's map count.
  ContextHarness h(test_config(), false, 1);
  h.create_shmem();
  REQUIRE(has_spm(h));
  constexpr int kBos = 64;
  std::vector<uint32_t> bos;
  for (int i = 0; i < kBos; ++i) {
    int32_t r;
    bos.push_back(h.bo_create(4096, RVGL_DOMAIN_GTT, 0, 0, &r));
    REQUIRE(r == 0);
  }
  REQUIRE(acquire(h) == 0);  // an earlier test's released sessions finished first
  const size_t before = bo_mappings();
  for (const uint32_t bo : bos) {
    rvgl_rsp_spm_set_dest rsp;
    REQUIRE(wait_rsp(h, set_dest(h, bo, 0, 4096, 0), &rsp));
    REQUIRE(rsp.hdr.result == 0);
    CHECK(bo_mappings() <= before + 1);  // the current destination's only
  }
  rvgl_rsp_spm_set_dest rsp;
  REQUIRE(wait_rsp(h, set_dest(h, 0, 0, 0, 0), &rsp));  // stops the stream
  REQUIRE(rsp.hdr.result == 0);
  CHECK(bo_mappings() == before);
  REQUIRE(release(h) == 0);
  SpmReaper::instance().drain();
}
