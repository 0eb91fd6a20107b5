// Issue 14, finding 1: the SPM never writes into a userptr blob's pages once the VMM dropped the
// blob (unref / detach / context destroy), whatever the kernel call in flight. And the seqno rule
// of a deferred SET_DEST (finding 6): shmem.seqno moves when it is accepted, its response later.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <memory>

#include "robustness/robust_support.h"
#include "spm/spm_reaper.h"
#include "support/guest_ram.h"
#include "support/thread_count.h"

using namespace rvgl;
using namespace rvgl::test;

namespace {

constexpr uint32_t kRing = 9;
constexpr uint32_t kDest = 64 * 1024;
constexpr uint8_t kPoison = 0xa5;

int32_t acquire(ContextHarness &h) {
  SpmReaper::instance().drain();
  rvgl_req_spm_acquire r{};
  r.ring_idx = kRing;
  return h.call<rvgl_rsp_spm_acquire>(RVGL_CMD_SPM_ACQUIRE, r).hdr.result;
}

struct Pending {
  uint32_t seqno, off;
};

// SET_DEST answered into `off` (RVGL_RSP_NONE: no response asked for); its seqno.
uint32_t send_set_dest(ContextHarness &h, uint32_t bo, uint32_t res, uint64_t size,
                       uint32_t timeout, uint32_t off) {
  rvgl_req_spm_set_dest r{};
  r.bo = bo;
  r.res_id = res;
  r.size = size;
  r.timeout_ms = timeout;
  const uint32_t seqno = h.next_seqno();
  r.hdr = {RVGL_CMD_SPM_SET_DEST, sizeof(r), seqno, off};
  REQUIRE(h.ctx().submit_cmd({reinterpret_cast<const uint8_t *>(&r), sizeof(r)}) == 0);
  return seqno;
}

// SET_DEST into a response slot of its own (a rotating one per call).
Pending set_dest(ContextHarness &h, uint32_t bo, uint32_t res, uint64_t size, uint32_t timeout) {
  static uint32_t n = 0;
  const uint32_t off = RVGL_RSP_AREA_SIZE - 64 * (1 + n++ % 8);
  return {send_set_dest(h, bo, res, size, timeout, off), off};
}

bool wait_rsp(ContextHarness &h, const Pending &p, rvgl_rsp_spm_set_dest *out, int ms = 8000) {
  return wait_for(
      [&] {
        std::memcpy(out, h.shmem() + RVGL_RSP_AREA_OFFSET + p.off, sizeof(*out));
        return __atomic_load_n(&out->hdr.seqno, __ATOMIC_ACQUIRE) == p.seqno;
      },
      ms);
}

}  // namespace

TEST_CASE("SPM lifetimes: a userptr destination receives its samples when retired", "[spm]") {
  ScopedKnob rate("RVGL_EMU_SPM_RATE_HZ", "20000", "1000");
  ContextHarness h;
  h.create_shmem();
  REQUIRE((h.capset().features & RVGL_FEATURE_SPM) != 0);
  GuestPages g(kDest);
  g.fill(kPoison);
  int err;
  const uint32_t res = userptr_blob(h, g, &err);
  REQUIRE(err == 0);
  auto other = h.mapped_bo(kDest);
  REQUIRE(acquire(h) == 0);
  set_dest(h, 0, res, kDest, 0);
  const Pending p = set_dest(h, other.bo, 0, kDest, 200);  // retires the userptr destination
  rvgl_rsp_spm_set_dest rsp;
  REQUIRE(wait_rsp(h, p, &rsp));
  REQUIRE(rsp.hdr.result == 0);
  REQUIRE(rsp.bytes_copied > 0);
  // Each slice's header accounts for its samples, and the sum is the response's bytes_copied.
  const uint32_t xccs = h.capset().num_xcc;
  const uint64_t slice = (kDest / xccs) & ~uint64_t{31};
  uint64_t sum = 0;
  for (uint32_t x = 0; x < xccs; ++x) {
    rvgl_drm_amdgpu_spm_buffer_header hdr;
    std::memcpy(&hdr, g.ptr(x * slice), sizeof(hdr));
    CHECK(hdr.version >> 24 == 1);
    sum += hdr.bytes_copied;
  }
  CHECK(sum == rsp.bytes_copied);
}

TEST_CASE("SPM lifetimes: nothing lands in a userptr blob's pages after unref", "[spm]") {
  ScopedKnob rate("RVGL_EMU_SPM_RATE_HZ", "20000", "1000");
  ContextHarness h;
  h.create_shmem();
  REQUIRE((h.capset().features & RVGL_FEATURE_SPM) != 0);
  auto other = h.mapped_bo(kDest);
  REQUIRE(acquire(h) == 0);
  for (int round = 0; round < 20; ++round) {
    GuestPages g(kDest);
    int err;
    const uint32_t res = userptr_blob(h, g, &err);
    REQUIRE(err == 0);
    set_dest(h, 0, res, kDest, 0);  // the stream goes into the guest's pages
    // Half the rounds drop the blob while the next SET_DEST is blocked in the kernel.
    const bool blocked = round % 2;
    Pending p{};
    if (blocked) p = set_dest(h, other.bo, 0, kDest, 100);
    h.ctx().detach_resource(res);  // what vrend-hooks does on unref
    g.fill(kPoison);               // the pages now belong to someone else
    if (!blocked) p = set_dest(h, other.bo, 0, kDest, 0);
    rvgl_rsp_spm_set_dest rsp;
    REQUIRE(wait_rsp(h, p, &rsp));
    CHECK(rsp.hdr.result == 0);
    CHECK(g.differing(kPoison) == 0);
    CHECK(h.ctx().stats().resources == 2);  // shared page + the BO destination
  }
}

TEST_CASE("SPM lifetimes: context destroy with SET_DEST blocked writes nothing after", "[spm]") {
  ScopedKnob rate("RVGL_EMU_SPM_RATE_HZ", "20000", "1000");
  for (int round = 0; round < 5; ++round) {
    GuestPages g(kDest);
    {
      auto h = std::make_unique<ContextHarness>();
      h->create_shmem();
      REQUIRE((h->capset().features & RVGL_FEATURE_SPM) != 0);
      int err;
      const uint32_t res = userptr_blob(*h, g, &err);
      REQUIRE(err == 0);
      REQUIRE(acquire(*h) == 0);
      set_dest(*h, 0, res, kDest, 0);
      // Retiring it blocks in the kernel (a slow stream never fills the buffer in time).
      auto other = h->mapped_bo(kDest);
      set_dest(*h, other.bo, 0, kDest, 300);
      h.reset();  // the guest disconnects: context destroy
    }
    g.fill(kPoison);
    SpmReaper::instance().drain();  // the released session finishes on the reaper
    CHECK(g.differing(kPoison) == 0);
  }
}

TEST_CASE("SPM lifetimes: a deferred SET_DEST publishes its seqno before its response", "[spm]") {
  ScopedKnob rate("RVGL_EMU_SPM_RATE_HZ", "10", "1000");  // never fills: the call blocks
  ContextHarness h;
  h.create_shmem();
  REQUIRE((h.capset().features & RVGL_FEATURE_SPM) != 0);
  auto a = h.mapped_bo(kDest), b = h.mapped_bo(kDest);
  REQUIRE(acquire(h) == 0);
  set_dest(h, a.bo, 0, kDest, 0);
  const Pending p = set_dest(h, b.bo, 0, kDest, 300);
  // Accepted: shmem.seqno says so at once (PROTOCOL.md, rocm_virgl_protocol.h) ...
  CHECK(h.shmem_header().seqno == p.seqno);
  rvgl_rsp_spm_set_dest rsp;
  std::memcpy(&rsp, h.shmem() + RVGL_RSP_AREA_OFFSET + p.off, sizeof(rsp));
  CHECK(rsp.hdr.seqno != p.seqno);  // ... while its response comes when the kernel returns
  REQUIRE(wait_rsp(h, p, &rsp));
  CHECK(rsp.hdr.result == 0);
}

TEST_CASE("SPM lifetimes: SET_DESTs pending at SPM_RELEASE are answered and their fences retire",
          "[spm]") {
  // Released while one SET_DEST blocks in the kernel and one waits behind it: the session
  // finishes on the reaper while the context serves on, and both responses, and the SPM ring's
  // fence, must still reach the guest (before, the session was cut off from its context at
  // release: no response, and a fence ready that nobody delivered).
  ScopedKnob rate("RVGL_EMU_SPM_RATE_HZ", "10", "1000");  // never fills: the call blocks
  const bool async = GENERATE(false, true);
  INFO((async ? "async callbacks" : "poll mode"));
  for (int round = 0; round < 3; ++round) {
    ContextHarness h(test_config(), async);
    h.create_shmem();
    REQUIRE((h.capset().features & RVGL_FEATURE_SPM) != 0);
    auto a = h.mapped_bo(kDest), b = h.mapped_bo(kDest), c = h.mapped_bo(kDest);
    REQUIRE(acquire(h) == 0);
    set_dest(h, a.bo, 0, kDest, 0);
    const Pending blocked = set_dest(h, b.bo, 0, kDest, 300);
    const Pending queued = set_dest(h, c.bo, 0, kDest, 300);
    REQUIRE(h.fence(kRing, 1) == 0);
    rvgl_req_spm_release rel{};
    REQUIRE(h.call<rvgl_rsp_spm_release>(RVGL_CMD_SPM_RELEASE, rel).hdr.result == 0);
    rvgl_rsp_spm_set_dest rsp;
    REQUIRE(wait_rsp(h, blocked, &rsp));
    INFO("the blocked SET_DEST: " << rsp.hdr.result);
    // In the kernel when released (it returns then), or not yet (the release cancelled it).
    CHECK((rsp.hdr.result == 0 || rsp.hdr.result == -ECANCELED));
    REQUIRE(wait_rsp(h, queued, &rsp));
    CHECK(rsp.hdr.result == -ECANCELED);  // never reached the kernel
    CHECK(h.wait_fence(kRing, 1, 5000));
    SpmReaper::instance().drain();
  }
}

TEST_CASE("SPM lifetimes: a userptr destination's host buffer is charged as GTT while it is held",
          "[spm]") {
  Config c = test_config();
  c.limits.max_gtt_bytes = 4 * kDest;
  ContextHarness h(c);
  h.create_shmem();
  REQUIRE((h.capset().features & RVGL_FEATURE_SPM) != 0);
  auto gtt = [&] {
    rvgl_req_query_info q{};
    q.query = RVGL_INFO_USAGE;
    return h.call<rvgl_rsp_query_info>(RVGL_CMD_QUERY_INFO, q).data.usage.gtt_bytes;
  };
  GuestPages big(8 * kDest), small(kDest);
  int err;
  const uint32_t big_res = userptr_blob(h, big, &err);
  REQUIRE(err == 0);
  const uint32_t small_res = userptr_blob(h, small, &err);
  REQUIRE(err == 0);
  auto other = h.mapped_bo(kDest);  // GTT
  const uint64_t base = gtt();
  REQUIRE(base == kDest);
  REQUIRE(acquire(h) == 0);
  rvgl_rsp_spm_set_dest rsp;
  // Over the quota: refused before it is queued, nothing held.
  const Pending refused = set_dest(h, 0, big_res, 8 * kDest, 0);
  REQUIRE(wait_rsp(h, refused, &rsp));
  CHECK(rsp.hdr.result == -ENOSPC);
  CHECK(gtt() == base);
  // Held while it is the kernel's destination, given back once a later SET_DEST retired it.
  const Pending held = set_dest(h, 0, small_res, kDest, 0);
  REQUIRE(wait_rsp(h, held, &rsp));
  REQUIRE(rsp.hdr.result == 0);
  CHECK(gtt() == base + kDest);
  const Pending retire = set_dest(h, other.bo, 0, kDest, 0);
  REQUIRE(wait_rsp(h, retire, &rsp));
  REQUIRE(rsp.hdr.result == 0);
  CHECK(gtt() == base);
}

TEST_CASE("SPM lifetimes: a SET_DEST with no response slot that fails counts in async_error",
          "[spm]") {
  // PROTOCOL.md §4: async_error counts every request that failed with no response slot. A
  // SET_DEST is answered later, on the SPM worker, and only its response was written there: one
  // that the release cancelled (or the kernel refused) with rsp_off RVGL_RSP_NONE left no trace.
  // Found by an audit.
  ScopedKnob rate("RVGL_EMU_SPM_RATE_HZ", "10", "1000");  // never fills: the call blocks
  ContextHarness h;
  h.create_shmem();
  REQUIRE((h.capset().features & RVGL_FEATURE_SPM) != 0);
  auto a = h.mapped_bo(kDest), b = h.mapped_bo(kDest), c = h.mapped_bo(kDest);
  REQUIRE(acquire(h) == 0);
  set_dest(h, a.bo, 0, kDest, 0);
  const Pending blocked = set_dest(h, b.bo, 0, kDest, 300);
  const uint32_t before = h.shmem_header().async_error;
  send_set_dest(h, c.bo, 0, kDest, 300, RVGL_RSP_NONE);
  CHECK(h.shmem_header().async_error == before);  // accepted
  rvgl_req_spm_release rel{};
  REQUIRE(h.call<rvgl_rsp_spm_release>(RVGL_CMD_SPM_RELEASE, rel).hdr.result == 0);
  rvgl_rsp_spm_set_dest rsp;
  REQUIRE(wait_rsp(h, blocked, &rsp));
  SpmReaper::instance().drain();  // the released session has finished every SET_DEST
  // The queued one never reached the kernel: cancelled, and counted once. The blocked one had a
  // slot for its answer.
  CHECK(h.shmem_header().async_error == before + 1);
}

TEST_CASE("SPM lifetimes: a doorbell object is no SPM destination", "[spm]") {
  // Doorbell objects are CPU-mappable, so the host mapped one and the kernel would stream samples
  // into the context's own doorbells. Found by an audit.
  ContextHarness h;
  h.create_shmem();
  REQUIRE((h.capset().features & RVGL_FEATURE_SPM) != 0);
  if (!(h.capset().features & RVGL_FEATURE_USER_QUEUES)) return;  // no doorbell objects here
  int32_t r = 0;
  const uint32_t db = h.bo_create(4096, RVGL_DOMAIN_DOORBELL, 0, 0, &r);
  REQUIRE(r == 0);
  REQUIRE(acquire(h) == 0);
  rvgl_req_spm_set_dest sd{};
  sd.bo = db;
  sd.size = 4096;
  CHECK(h.call<rvgl_rsp_spm_set_dest>(RVGL_CMD_SPM_SET_DEST, sd).hdr.result == -EINVAL);
  rvgl_req_spm_release rel{};
  CHECK(h.call<rvgl_rsp_spm_release>(RVGL_CMD_SPM_RELEASE, rel).hdr.result == 0);
}

TEST_CASE("SPM lifetimes: an idle SPM released in a loop leaves no thread and nothing retired",
          "[spm]") {
  // With nothing in the kernel a release finishes the session on the VMM's thread. It used to
  // hand each one to a reaper thread while the SPM was already free for the next ACQUIRE, so a
  // guest acquiring and releasing in a loop started threads faster than they ended (found by a
  // review: 554 threads after 12000 pairs on one CPU).
  ContextHarness h(test_config(), true);
  h.create_shmem();
  REQUIRE((h.capset().features & RVGL_FEATURE_SPM) != 0);
  SpmReaper::instance().drain();
  const int before = thread_count();
  REQUIRE(SpmReaper::instance().retired() == 0);
  int acquired = 0, released = 0, retired_left = 0;
  for (int i = 0; i < 500; ++i) {
    rvgl_req_spm_acquire a{};
    a.ring_idx = kRing;
    acquired += h.call<rvgl_rsp_spm_acquire>(RVGL_CMD_SPM_ACQUIRE, a).hdr.result == 0;
    rvgl_req_spm_release rel{};
    released += h.call<rvgl_rsp_spm_release>(RVGL_CMD_SPM_RELEASE, rel).hdr.result == 0;
    retired_left += SpmReaper::instance().retired() != 0;  // no thread was handed a session
  }
  CHECK(acquired == 500);
  CHECK(released == 500);
  CHECK(retired_left == 0);
  // Each worker was joined by its RELEASE; the kernel lists a joined thread a moment longer.
  CHECK(wait_for([&] { return thread_count() == before; }, 2000));
}
