// Issue 4: each quota returns its documented error when exceeded; the host stays up.
#include <catch2/catch.hpp>

#include <fcntl.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "../tools/common/amd_packets.h"
#include "rvgl_emu.h"
#include "support/context_harness.h"
#include "support/guest_ram.h"
#include "support/scoped_knob.h"
#include "support/stream_builder.h"

using namespace rvgl;
using namespace rvgl::test;

namespace {

// One PM4 WRITE_DATA into a mapped buffer at va_start, as an IB mapped above it.
rvgl_ib one_write_job(ContextHarness &h) {
  const uint64_t va0 = h.capset().va_start;
  auto buf = h.mapped_bo(64 * 1024), ib = h.mapped_bo(64 * 1024);
  REQUIRE(h.va_map(buf.bo, 0, 0, va0, 64 * 1024) == 0);
  REQUIRE(h.va_map(ib.bo, 0, 0, va0 + 1024 * 1024, 64 * 1024) == 0);
  std::vector<uint32_t> dw;
  packets::pm4_write_data(dw, va0, {1});
  return ContextHarness::write_ib(ib, va0 + 1024 * 1024, dw);
}

// A GTT BO made under `blob_id` and claimed as a shareable HOST3D blob; vmm is what the VMM's
// resource holds (its dma-buf and the charge).
struct Claimed {
  uint32_t bo, res;
  BlobExport vmm;
};
Claimed shareable_claim(ContextHarness &h, uint64_t size, uint64_t blob_id) {
  Claimed c;
  int32_t r;
  c.bo = h.bo_create(size, RVGL_DOMAIN_GTT, 0, blob_id, &r);
  REQUIRE(r == 0);
  c.res = h.next_res_id();
  REQUIRE(h.create_blob(c.res, RVGL_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_SHAREABLE, blob_id, size,
                        &c.vmm) == 0);
  return c;
}

}  // namespace

TEST_CASE("object quota", "[context][quota]") {
  Config c = test_config();
  c.limits.max_objects = 3;
  ContextHarness h(c);
  h.create_shmem();
  int32_t r;
  uint32_t bos[3];
  for (auto &b : bos) {
    b = h.bo_create(4096, RVGL_DOMAIN_GTT, 0, 0, &r);
    REQUIRE(r == 0);
  }
  h.bo_create(4096, RVGL_DOMAIN_GTT, 0, 0, &r);
  CHECK(r == -ENOSPC);
  REQUIRE(h.bo_free(bos[1]) == 0);
  h.bo_create(4096, RVGL_DOMAIN_GTT, 0, 0, &r);
  CHECK(r == 0);
}

TEST_CASE("byte quotas per domain", "[context][quota]") {
  Config c = test_config();
  c.limits.max_gtt_bytes = 64 * 1024;
  c.limits.max_vram_bytes = 128 * 1024;
  ContextHarness h(c);
  h.create_shmem();
  int32_t r;
  h.bo_create(64 * 1024, RVGL_DOMAIN_GTT, 0, 0, &r);
  CHECK(r == 0);
  h.bo_create(4096, RVGL_DOMAIN_GTT, 0, 0, &r);
  CHECK(r == -ENOSPC);
  const uint32_t v = h.bo_create(128 * 1024, RVGL_DOMAIN_VRAM, 0, 0, &r);
  CHECK(r == 0);
  h.bo_create(4096, RVGL_DOMAIN_VRAM, 0, 0, &r);
  CHECK(r == -ENOSPC);
  REQUIRE(h.bo_free(v) == 0);
  h.bo_create(128 * 1024, RVGL_DOMAIN_VRAM, 0, 0, &r);
  CHECK(r == 0);

  rvgl_req_query_info q{};
  q.query = RVGL_INFO_USAGE;
  auto u = h.call<rvgl_rsp_query_info>(RVGL_CMD_QUERY_INFO, q);
  REQUIRE(u.hdr.result == 0);
  CHECK(u.data.usage.gtt_bytes == 64 * 1024);
  CHECK(u.data.usage.vram_bytes == 128 * 1024);
  CHECK(u.data.usage.max_gtt_bytes == 64 * 1024);
}

TEST_CASE("a claimed blob keeps its charge after BO_FREE until the resource goes",
          "[context][quota]") {
  Config c = test_config();
  c.limits.max_gtt_bytes = 64 * 1024;
  ContextHarness h(c);
  h.create_shmem();
  auto buf = h.mapped_bo(64 * 1024);
  REQUIRE(h.bo_free(buf.bo) == 0);
  int32_t r;
  h.bo_create(4096, RVGL_DOMAIN_GTT, 0, 0, &r);
  CHECK(r == -ENOSPC);
  h.ctx().detach_resource(buf.res_id);
  h.bo_create(4096, RVGL_DOMAIN_GTT, 0, 0, &r);
  CHECK(r == 0);
}

TEST_CASE("a claimed blob stays charged while the VMM's resource holds it, detached or not",
          "[context][quota]") {
  constexpr uint64_t kSize = 4ull << 20;
  Config c = test_config();
  c.limits.max_gtt_bytes = kSize;
  ContextHarness h(c);
  h.create_shmem();
  for (int round = 0; round < 20; ++round) {
    INFO("round " << round);
    int32_t r;
    // vmm: what the VMM's resource keeps until it unrefs the resource.
    auto [bo, res, vmm] = shareable_claim(h, kSize, 1000 + static_cast<uint64_t>(round));
    // The guest lets go of every name it has for the memory; the VMM's dma-buf still holds it.
    REQUIRE(h.bo_free(bo) == 0);
    h.ctx().detach_resource(res);
    CHECK(h.ctx().stats().usage.gtt_bytes == kSize);
    CHECK(h.ctx().stats().usage.objects == 1);
    h.bo_create(4096, RVGL_DOMAIN_GTT, 0, 0, &r);
    CHECK(r == -ENOSPC);
    // Attached again (an import of the VMM's fd): one more kernel handle, no more bytes.
    REQUIRE(h.ctx().attach_foreign(res, UniqueFd(fcntl(vmm.fd.get(), F_DUPFD_CLOEXEC, 0)), kSize) ==
            0);
    CHECK(h.ctx().stats().usage.gtt_bytes == kSize);
    CHECK(h.ctx().stats().usage.objects == 2);
    h.ctx().detach_resource(res);
    // The VMM unrefs the resource: the memory is gone, and so is its charge.
    vmm = BlobExport();
    CHECK(h.ctx().stats().usage.gtt_bytes == 0);
    CHECK(h.ctx().stats().usage.objects == 0);
  }
}

TEST_CASE("userptr byte quota", "[context][quota]") {
  Config c = test_config();
  c.limits.max_userptr_bytes = 8192;
  ContextHarness h(c);
  void *mem = mmap(nullptr, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mem != MAP_FAILED);
  iovec iov{mem, 3 * 4096};
  BlobArgs a;
  a.res_id = h.next_res_id();
  a.blob_mem = RVGL_BLOB_MEM_GUEST;
  a.blob_flags = RVGL_BLOB_FLAG_USERPTR;
  a.size = 3 * 4096;
  a.iov = {&iov, 1};
  BlobExport e;
  CHECK(h.ctx().create_blob(a, &e) == -ENOSPC);
  iov.iov_len = 8192;
  a.size = 8192;
  CHECK(h.ctx().create_blob(a, &e) == 0);
  h.ctx().detach_resource(a.res_id);
  CHECK(h.ctx().stats().usage.userptr_bytes == 0);
  munmap(mem, 3 * 4096);
}

TEST_CASE("queue quota", "[context][quota]") {
  Config c = test_config();
  c.limits.max_queues = 2;
  ContextHarness h(c);
  h.create_shmem();
  int32_t r;
  h.queue_create(RVGL_IP_COMPUTE, 1, &r);
  REQUIRE(r == 0);
  const uint32_t q2 = h.queue_create(RVGL_IP_SDMA, 2, &r);
  REQUIRE(r == 0);
  h.queue_create(RVGL_IP_COMPUTE, 3, &r);
  CHECK(r == -ENOSPC);
  REQUIRE(h.queue_destroy(q2) == 0);
  h.queue_create(RVGL_IP_COMPUTE, 3, &r);
  CHECK(r == 0);
}

TEST_CASE("VA mapping quota", "[context][quota]") {
  // One small object mapped at ever new addresses: without a limit the host's bookkeeping and
  // the kernel's mappings and page tables grew with no bound (found by an audit: 50,000 mappings
  // of one 4 KiB BO with an object quota of 4).
  Config c = test_config();
  c.limits.max_va_mappings = 8;
  ContextHarness h(c);
  h.create_shmem();
  int32_t r;
  const uint32_t bo = h.bo_create(4096, RVGL_DOMAIN_GTT, 0, 0, &r);
  REQUIRE(r == 0);
  const uint64_t va0 = h.capset().va_start, step = 2ull << 20;
  for (uint64_t i = 0; i < 8; ++i)
    REQUIRE(h.va_map(bo, 0, 0, va0 + i * step, 4096) == 0);
  CHECK(h.va_map(bo, 0, 0, va0 + 8 * step, 4096) == -ENOSPC);
  rvgl_req_va_unmap u{};
  u.va = va0;
  u.size = 4096;
  REQUIRE(h.call<rvgl_rsp_va_unmap>(RVGL_CMD_VA_UNMAP, u).hdr.result == 0);
  CHECK(h.va_map(bo, 0, 0, va0 + 8 * step, 4096) == 0);
}

TEST_CASE("the VA mapping quota counts kernel mappings: a scattered userptr blob's pieces",
          "[context][quota]") {
  // One VA_MAP of a blob over scattered anonymous pages is a kernel mapping per piece: counted
  // as one, 65,536 maps of a blob of 16,384 pieces were a billion kernel mappings (an audit).
  constexpr uint64_t kPieces = 4, kPage = 4096;
  Config c = test_config();
  c.limits.max_va_mappings = 2 * kPieces + 1;
  ContextHarness h(c);
  h.create_shmem();
  GuestPages ram(2 * kPieces * kPage, /*memfd=*/false);
  std::vector<iovec> iov;
  for (uint64_t i = 0; i < kPieces; ++i)
    iov.push_back({ram.ptr(2 * i * kPage), kPage});  // every other page: nothing merges
  int err;
  const uint32_t res = userptr_blob(h, iov, &err);
  REQUIRE(err == 0);
  REQUIRE(h.ctx().stats().last_userptr_objects == kPieces);
  const uint64_t va0 = h.capset().va_start, step = 2ull << 20;
  REQUIRE(h.va_map(0, res, 0, va0, kPieces * kPage) == 0);
  REQUIRE(h.va_map(0, res, 0, va0 + step, kPieces * kPage) == 0);
  CHECK(h.va_map(0, res, 0, va0 + 2 * step, kPieces * kPage) == -ENOSPC);  // 1 of 4 left
  CHECK(h.va_map(0, res, 0, va0 + 2 * step, kPage) == 0);                  // one piece fits
  rvgl_req_va_unmap u{};
  u.va = va0;
  u.size = kPieces * kPage;
  REQUIRE(h.call<rvgl_rsp_va_unmap>(RVGL_CMD_VA_UNMAP, u).hdr.result == 0);
  CHECK(h.va_map(0, res, 0, va0 + 3 * step, kPieces * kPage) == 0);
  CHECK(h.va_map(0, res, 0, va0 + 4 * step, kPage) == -ENOSPC);
}

TEST_CASE("mapped bytes are bounded, however often one object is mapped", "[context][quota]") {
  // Page tables grow with mapped bytes: one 256 MiB BO mapped 65,536 times was 16 TiB of GPU VA
  // (an audit).
  constexpr uint64_t kSize = 1 << 20;
  Config c = test_config();
  c.limits.max_va_bytes = 3 * kSize;
  ContextHarness h(c);
  h.create_shmem();
  int32_t r;
  const uint32_t bo = h.bo_create(kSize, RVGL_DOMAIN_GTT, 0, 0, &r);
  REQUIRE(r == 0);
  const uint64_t va0 = h.capset().va_start, step = 2 * kSize;
  for (uint64_t i = 0; i < 3; ++i)
    REQUIRE(h.va_map(bo, 0, 0, va0 + i * step, kSize) == 0);
  CHECK(h.va_map(bo, 0, 0, va0 + 3 * step, kSize) == -ENOSPC);
  CHECK(h.va_map(bo, 0, 0, va0 + 3 * step, 4096) == -ENOSPC);
  // BO_FREE unmaps it everywhere: all of it is free again.
  rvgl_req_bo_free f{};
  f.bo = bo;
  REQUIRE(h.call<rvgl_rsp_bo_free>(RVGL_CMD_BO_FREE, f).hdr.result == 0);
  const uint32_t again = h.bo_create(3 * kSize, RVGL_DOMAIN_GTT, 0, 0, &r);
  REQUIRE(r == 0);
  CHECK(h.va_map(again, 0, 0, va0, 3 * kSize) == 0);
}

TEST_CASE("a destroyed queue counts against the queue quota until its fences retire",
          "[context][quota]") {
  // Its kernel context, timeline and watch stay while fences wait on it: a guest destroying busy
  // queues in a loop must not hold them beyond the quota (found by an audit: 200 rounds with a
  // quota of 1 held 200 kernel contexts and 401 fds).
  ScopedKnob slow("RVGL_EMU_JOB_LATENCY_US", "300000");
  REQUIRE(slow.ok());
  Config c = test_config();
  c.limits.max_queues = 1;
  ContextHarness h(c);
  h.create_shmem();
  const rvgl_ib job = one_write_job(h);
  for (uint64_t round = 1; round <= 3; ++round) {
    int32_t r;
    const uint32_t q = h.queue_create(RVGL_IP_COMPUTE, 3, &r);
    REQUIRE(r == 0);
    h.submit(q, {job}, {}, &r);
    REQUIRE(r == 0);
    REQUIRE(h.fence(3, round) == 0);
    REQUIRE(h.queue_destroy(q) == 0);
    h.queue_create(RVGL_IP_COMPUTE, 3, &r);
    CHECK(r == -ENOSPC);  // its job still runs, a fence waits for it
    REQUIRE(h.wait_fence(3, round));
    // Retired: the next QUEUE_CREATE finds it gone (the loop's own create).
  }
}

TEST_CASE("a destroyed queue with no fence of its own is let go at once", "[context][quota]") {
  // Only fences that wait on its timeline hold it, not an earlier destroyed queue's on the same
  // ring (found in review).
  ScopedKnob slow("RVGL_EMU_JOB_LATENCY_US", "1000000");
  REQUIRE(slow.ok());
  Config c = test_config();
  c.limits.max_queues = 2;
  ContextHarness h(c);
  h.create_shmem();
  const rvgl_ib job = one_write_job(h);
  int32_t r;
  const uint32_t q1 = h.queue_create(RVGL_IP_COMPUTE, 3, &r);
  REQUIRE(r == 0);
  h.submit(q1, {job}, {}, &r);
  REQUIRE(r == 0);
  REQUIRE(h.fence(3, 1) == 0);        // waits about a second on q1's timeline
  REQUIRE(h.queue_destroy(q1) == 0);  // draining: one of the two
  const uint32_t q2 = h.queue_create(RVGL_IP_COMPUTE, 3, &r);
  REQUIRE(r == 0);
  REQUIRE(h.fence(3, 2) == 0);  // q2 submitted nothing: behind fence 1, not on q2's timeline
  REQUIRE(h.queue_destroy(q2) == 0);
  h.queue_create(RVGL_IP_COMPUTE, 4, &r);
  CHECK(r == 0);
  REQUIRE(h.wait_fence(3, 2));
}

TEST_CASE("a VA_MAP that failed part way and a detached blob give their quota back",
          "[context][quota]") {
  constexpr uint64_t kPieces = 4, kPage = 4096;
  Config c = test_config();
  c.limits.max_va_mappings = kPieces;
  c.limits.max_va_bytes = kPieces * kPage;
  ContextHarness h(c);
  h.create_shmem();
  GuestPages ram(2 * kPieces * kPage, /*memfd=*/false);
  std::vector<iovec> iov;
  for (uint64_t i = 0; i < kPieces; ++i)
    iov.push_back({ram.ptr(2 * i * kPage), kPage});
  int err;
  const uint32_t res = userptr_blob(h, iov, &err);
  REQUIRE(err == 0);
  const uint64_t va0 = h.capset().va_start;
  rvgl_emu_reset_fault_injection();
  REQUIRE(rvgl_emu_set_knob("RVGL_EMU_FAIL", "GEM_VA:3:ENOMEM") == 0);
  CHECK(h.va_map(0, res, 0, va0, kPieces * kPage) == -ENOMEM);  // the third piece
  rvgl_emu_reset_fault_injection();
  CHECK(h.ctx().stats().va_mappings == 0);
  REQUIRE(h.va_map(0, res, 0, va0, kPieces * kPage) == 0);  // the undo kept nothing
  h.ctx().detach_resource(res);
  const uint32_t again = userptr_blob(h, iov, &err);
  REQUIRE(err == 0);
  CHECK(h.va_map(0, again, 0, va0, kPieces * kPage) == 0);  // the detach gave it all back
}

TEST_CASE("waiting fences are bounded per context", "[context][quota]") {
  // A vtest client can create fences faster than a hung or slow queue retires them; each is host
  // memory (an audit: +40 MiB for a million on the events ring, which may never retire).
  ScopedKnob slow("RVGL_EMU_JOB_LATENCY_US", "1000000");
  REQUIRE(slow.ok());
  ContextHarness h;
  h.create_shmem();
  const rvgl_ib job = one_write_job(h);
  int32_t r;
  const uint32_t q = h.queue_create(RVGL_IP_COMPUTE, 3, &r);
  REQUIRE(r == 0);
  h.submit(q, {job}, {}, &r);
  REQUIRE(r == 0);
  constexpr uint64_t kMax = ComputeContext::kMaxWaitingFences;
  uint64_t accepted = 0;
  for (uint64_t id = 1; id <= kMax + 10; ++id)
    accepted += h.fence(3, id) == 0;
  CHECK(accepted == kMax);
  CHECK(h.fence(RVGL_RING_EVENTS, 1) == -ENOSPC);  // every ring: the bound is the context's
  REQUIRE(h.wait_fence(3, kMax));                  // the job is done: all of them retired
  CHECK(h.fence(3, kMax + 11) == 0);
}

TEST_CASE("fences queued for a VMM that does not poll count against the same bound",
          "[context][quota]") {
  // Poll mode: a fence for work already done (a free ring) waits in the queue for poll().
  ContextHarness h(test_config(), /*async=*/false);
  h.create_shmem();
  constexpr uint64_t kMax = ComputeContext::kMaxWaitingFences;
  uint64_t accepted = 0;
  for (uint64_t id = 1; id <= kMax + 10; ++id)
    accepted += h.fence(20, id) == 0;
  CHECK(accepted == kMax);
  CHECK(h.ctx().fences().pending() == kMax);
  CHECK(h.fence(21, 1) == -ENOSPC);
  h.ctx().poll();  // the VMM takes them
  CHECK(h.ctx().fences().pending() == 0);
  CHECK(h.fences().has(20, kMax));
  CHECK(h.fence(20, kMax + 11) == 0);
}

TEST_CASE("submit size and IB count limits", "[context][quota]") {
  Config c = test_config();
  c.limits.max_submit_bytes = 64;
  c.limits.max_ibs_per_submit = 2;
  ContextHarness h(c);
  h.create_shmem();
  StreamBuilder s;
  rvgl_req_nop nop{};
  for (uint32_t i = 1; i <= 5; ++i)
    s.add(nop, RVGL_CMD_NOP, h.next_seqno(), RVGL_RSP_NONE);
  const uint32_t before = h.shmem_header().async_error;
  CHECK(h.ctx().submit_cmd(s.span()) == -EINVAL);  // 80 bytes > 64
  CHECK(h.shmem_header().async_error == before + 1);
  CHECK(h.capset().max_submit_bytes == 64);
  CHECK(h.capset().max_ibs_per_submit == 2);
}

TEST_CASE("memory another context imported stays charged to its maker until the import goes",
          "[context][quota]") {
  // The import itself charges no bytes (the maker's object holds the memory). Without the
  // maker's charge, a guest could free and unref a blob that another of its contexts still maps,
  // and make more, outside every quota: memory bounded by nothing but the importer's VA room.
  constexpr uint64_t kSize = 1ull << 20;
  Config c = test_config();
  c.limits.max_gtt_bytes = kSize;
  ContextHarness a(c, false, 1), b(test_config(), false, 2);
  a.create_shmem();
  b.create_shmem();
  const uint64_t va = b.capset().va_start;
  for (int round = 0; round < 10; ++round) {
    INFO("round " << round);
    int32_t r;
    auto [bo, res, vmm] = shareable_claim(a, kSize, 1000 + static_cast<uint64_t>(round));
    // b imports the VMM's resource (the router's ctx_attach_resource) and maps it.
    REQUIRE(b.ctx().attach_foreign(res, UniqueFd(fcntl(vmm.fd.get(), F_DUPFD_CLOEXEC, 0)), kSize,
                                   vmm.charge) == 0);
    REQUIRE(b.va_map(0, res, 0, va, kSize) == 0);
    // a lets go of it and the VMM unrefs the resource; b still maps the memory.
    REQUIRE(a.bo_free(bo) == 0);
    a.ctx().detach_resource(res);
    vmm = BlobExport();
    b.ctx().detach_resource(res);
    CHECK(a.ctx().stats().usage.gtt_bytes == kSize);
    a.bo_create(4096, RVGL_DOMAIN_GTT, 0, 0, &r);
    CHECK(r == -ENOSPC);
    CHECK(b.ctx().stats().usage.gtt_bytes == 0);  // charged once, to its maker
    // b's mapping was the last hold on the memory: unmapped, the charge goes.
    REQUIRE(b.va_unmap(va, kSize) == 0);
    CHECK(a.ctx().stats().usage.gtt_bytes == 0);
    CHECK(a.ctx().stats().usage.objects == 0);
    CHECK(b.ctx().stats().usage.objects == 0);
  }
}
