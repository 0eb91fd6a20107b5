// Issue 4: every malformed request gets a negative errno in its response, and the context keeps
// working afterwards.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdint>

#include "support/context_harness.h"

using namespace rvgl;
using namespace rvgl::test;

namespace {

constexpr uint64_t kMax = UINT64_MAX;

rvgl_req_bo_create bo(uint64_t size, uint32_t domain, uint32_t flags = 0, uint64_t align = 0,
                      uint64_t blob = 0) {
  rvgl_req_bo_create r{};
  r.size = size;
  r.domain = domain;
  r.flags = flags;
  r.alignment = align;
  r.blob_id = blob;
  return r;
}

rvgl_req_va_map map(uint32_t bo, uint32_t res, uint64_t off, uint64_t va, uint64_t size,
                    uint32_t flags = RVGL_VA_FLAG_READ) {
  rvgl_req_va_map r{};
  r.bo = bo;
  r.res_id = res;
  r.offset = off;
  r.va = va;
  r.size = size;
  r.flags = flags;
  return r;
}

rvgl_req_queue_create qc(uint32_t kind, uint32_t ip, uint32_t prio, uint32_t ring) {
  rvgl_req_queue_create r{};
  r.kind = kind;
  r.ip = ip;
  r.priority = prio;
  r.ring_idx = ring;
  return r;
}

}  // namespace

TEST_CASE("malformed BO_CREATE / BO_FREE", "[context][malformed]") {
  ContextHarness h;
  h.create_shmem();
  auto bc = [&](rvgl_req_bo_create r) {
    return h.call<rvgl_rsp_bo_create>(RVGL_CMD_BO_CREATE, r).hdr.result;
  };
  CHECK(bc(bo(0, RVGL_DOMAIN_GTT)) == -EINVAL);
  CHECK(bc(bo(4097, RVGL_DOMAIN_GTT)) == -EINVAL);
  CHECK(bc(bo(kMax & ~4095ull, RVGL_DOMAIN_GTT)) == -ENOSPC);  // beyond any quota
  CHECK(bc(bo(4096, RVGL_DOMAIN_GTT, 0, 3)) == -EINVAL);
  CHECK(bc(bo(4096, RVGL_DOMAIN_GTT, 0, 4ull << 20)) == -EINVAL);
  CHECK(bc(bo(4096, 0)) == -EINVAL);
  CHECK(bc(bo(4096, RVGL_DOMAIN_VRAM | RVGL_DOMAIN_GTT)) == -EINVAL);
  CHECK(bc(bo(4096, 8)) == -EINVAL);
  CHECK(bc(bo(4096, RVGL_DOMAIN_VRAM, 0x80)) == -EINVAL);
  CHECK(bc(bo(4096, RVGL_DOMAIN_VRAM, RVGL_BO_FLAG_CPU_ACCESS | RVGL_BO_FLAG_NO_CPU_ACCESS)) ==
        -EINVAL);
  CHECK(bc(bo(4096, RVGL_DOMAIN_VRAM, RVGL_BO_FLAG_WRITE_COMBINE)) == -EINVAL);
  REQUIRE(bc(bo(4096, RVGL_DOMAIN_GTT, 0, 0, 77)) == 0);
  CHECK(bc(bo(4096, RVGL_DOMAIN_GTT, 0, 0, 77)) == -EEXIST);  // blob_id reused

  CHECK(h.bo_free(0) == -ENOENT);
  CHECK(h.bo_free(999) == -ENOENT);
  CHECK(h.bo_free(0xffffffffu) == -ENOENT);
  CHECK(h.ctx().stats().usage.objects == 1);
}

TEST_CASE("malformed VA_MAP / VA_UNMAP", "[context][malformed]") {
  ContextHarness h;
  h.create_shmem();
  const uint64_t va = h.capset().va_start, end = h.capset().va_end;
  int32_t r;
  const uint32_t b = h.bo_create(64 * 1024, RVGL_DOMAIN_GTT, 0, 0, &r);
  REQUIRE(r == 0);
  auto vm = [&](rvgl_req_va_map m) {
    return h.call<rvgl_rsp_va_map>(RVGL_CMD_VA_MAP, m).hdr.result;
  };

  CHECK(vm(map(b, 5, 0, va, 4096)) == -EINVAL);                // both names
  CHECK(vm(map(0, 0, 0, va, 4096)) == -EINVAL);                // neither
  CHECK(vm(map(b, 0, 0, va, 4096, 0)) == -EINVAL);             // no READ
  CHECK(vm(map(b, 0, 0, va, 4096, 0x100 | 1)) == -EINVAL);     // unknown flag
  CHECK(vm(map(b, 0, 0, va, 0)) == -EINVAL);                   // size 0
  CHECK(vm(map(b, 0, 0, va + 8, 4096)) == -EINVAL);            // misaligned va
  CHECK(vm(map(b, 0, 8, va, 4096)) == -EINVAL);                // misaligned offset
  CHECK(vm(map(b, 0, 0, va, 4095)) == -EINVAL);                // misaligned size
  CHECK(vm(map(b, 0, kMax & ~4095ull, va, 8192)) == -EINVAL);  // offset + size wraps
  CHECK(vm(map(b, 0, 61440, va, 8192)) == -EINVAL);            // past the object
  CHECK(vm(map(b, 0, 0, va - 4096, 4096)) == -ERANGE);         // below the guest range
  CHECK(vm(map(b, 0, 0, end, 4096)) == -ERANGE);               // at the end
  CHECK(vm(map(b, 0, 0, kMax & ~4095ull, 8192)) == -ERANGE);   // va + size wraps
  CHECK(vm(map(999, 0, 0, va, 4096)) == -ENOENT);
  CHECK(vm(map(0, 999, 0, va, 4096)) == -ENOENT);
  REQUIRE(vm(map(b, 0, 0, va, 8192)) == 0);
  CHECK(vm(map(b, 0, 0, va + 4096, 4096)) == -EEXIST);  // overlap

  CHECK(h.va_unmap(va, 4096) == -ENOENT);  // not the exact mapping
  CHECK(h.va_unmap(va + 4096, 8192) == -ENOENT);
  CHECK(h.va_unmap(va, 0) == -EINVAL);
  CHECK(h.va_unmap(va + 1, 8192) == -EINVAL);
  CHECK(h.va_unmap(va, 8192) == 0);
  CHECK(h.va_unmap(va, 8192) == -ENOENT);  // twice
}

TEST_CASE("malformed QUEUE_CREATE / SUBMIT / QUEUE_STATE / QUERY_INFO", "[context][malformed]") {
  ContextHarness h;
  h.create_shmem();
  auto q = [&](rvgl_req_queue_create c) {
    return h.call<rvgl_rsp_queue_create>(RVGL_CMD_QUEUE_CREATE, c).hdr.result;
  };
  CHECK(q(qc(0, RVGL_IP_COMPUTE, 0, 1)) == -EINVAL);
  CHECK(q(qc(3, RVGL_IP_COMPUTE, 0, 1)) == -EINVAL);
  CHECK(q(qc(RVGL_QUEUE_KIND_KERNEL, 0, 0, 1)) == -EINVAL);
  CHECK(q(qc(RVGL_QUEUE_KIND_KERNEL, 3, 0, 1)) == -EINVAL);
  CHECK(q(qc(RVGL_QUEUE_KIND_KERNEL, RVGL_IP_COMPUTE, 3, 1)) == -EINVAL);
  CHECK(q(qc(RVGL_QUEUE_KIND_KERNEL, RVGL_IP_COMPUTE, 0, 0)) == -EINVAL);   // CPU ring
  CHECK(q(qc(RVGL_QUEUE_KIND_KERNEL, RVGL_IP_COMPUTE, 0, 63)) == -EINVAL);  // events ring
  CHECK(q(qc(RVGL_QUEUE_KIND_KERNEL, RVGL_IP_COMPUTE, 0, 99)) == -EINVAL);
  int32_t r;
  const uint32_t queue = h.queue_create(RVGL_IP_COMPUTE, 1, &r);
  REQUIRE(r == 0);
  CHECK(q(qc(RVGL_QUEUE_KIND_KERNEL, RVGL_IP_SDMA, 0, 1)) == -EBUSY);  // ring taken

  const uint64_t va = h.capset().va_start;
  const rvgl_ib good{va, 16, 0};
  auto sub = [&](uint32_t qh, std::vector<rvgl_ib> ibs, std::vector<rvgl_wait> w = {}) {
    int32_t res;
    h.submit(qh, std::move(ibs), std::move(w), &res);
    return res;
  };
  CHECK(sub(999, {good}) == -ENOENT);
  CHECK(sub(queue, {}) == -EINVAL);
  CHECK(sub(queue, {rvgl_ib{va, 0, 0}}) == -EINVAL);
  CHECK(sub(queue, {rvgl_ib{va, 6, 0}}) == -EINVAL);
  CHECK(sub(queue, {rvgl_ib{va + 2, 16, 0}}) == -EINVAL);
  CHECK(sub(queue, {rvgl_ib{va, 16, 1}}) == -EINVAL);
  CHECK(sub(queue, {rvgl_ib{h.capset().va_end, 16, 0}}) == -EINVAL);
  CHECK(sub(queue, {rvgl_ib{kMax & ~3ull, 16, 0}}) == -EINVAL);
  CHECK(sub(queue, {good}, {{999, 0, 1}}) == -ENOENT);
  CHECK(sub(queue, {good}, {{queue, 0, 5}}) == -EINVAL);  // seq never submitted
  CHECK(sub(queue, std::vector<rvgl_ib>(h.capset().max_ibs_per_submit + 1, good)) == -EINVAL);
  // The advertised maximum itself is one CS (its chunk array grows with the IB count).
  CHECK(sub(queue, std::vector<rvgl_ib>(h.capset().max_ibs_per_submit, good)) == 0);
  // Padding is ignored on receipt (PROTOCOL.md), a wait's too: it was refused with -EINVAL. On a
  // queue of its own: nothing is mapped at the IB's address, so the job faults and, with
  // vm_fault_stop=2, loses its queue, which then refuses work (-ECANCELED).
  const uint32_t padded = h.queue_create(RVGL_IP_COMPUTE, 2, &r);
  REQUIRE(r == 0);
  CHECK(sub(padded, {good}, {{queue, 0xffffffffu, 0}}) == 0);

  // Counts that promise more array entries than the request carries.
  rvgl_req_submit liar{};
  liar.queue = queue;
  liar.num_ibs = 0xffffffffu;
  CHECK(h.call<rvgl_rsp_submit>(RVGL_CMD_SUBMIT, liar).hdr.result == -EINVAL);
  liar.num_ibs = 2;
  const uint8_t one_ib[sizeof(rvgl_ib)] = {};
  CHECK(h.call<rvgl_rsp_submit>(RVGL_CMD_SUBMIT, liar, one_ib).hdr.result == -EINVAL);
  liar.num_ibs = 1;
  liar.num_waits = 0x10000000u;
  CHECK(h.call<rvgl_rsp_submit>(RVGL_CMD_SUBMIT, liar, one_ib).hdr.result == -EINVAL);

  rvgl_req_queue_state qs{};
  qs.queue = 0;
  CHECK(h.call<rvgl_rsp_queue_state>(RVGL_CMD_QUEUE_STATE, qs).hdr.result == -ENOENT);
  rvgl_req_query_info qi{};
  qi.query = 0;
  CHECK(h.call<rvgl_rsp_query_info>(RVGL_CMD_QUERY_INFO, qi).hdr.result == -EINVAL);
  qi.query = 0xffffffffu;
  CHECK(h.call<rvgl_rsp_query_info>(RVGL_CMD_QUERY_INFO, qi).hdr.result == -EINVAL);

  // SPM: ring 0 cannot carry SPM fences, xcp must exist, nothing held yet.
  rvgl_req_spm_acquire sa{};
  CHECK(h.call<rvgl_rsp_spm_acquire>(RVGL_CMD_SPM_ACQUIRE, sa).hdr.result == -EINVAL);
  sa.xcp = 7;
  sa.ring_idx = 9;
  CHECK(h.call<rvgl_rsp_spm_acquire>(RVGL_CMD_SPM_ACQUIRE, sa).hdr.result == -EINVAL);
  rvgl_req_spm_release sr{};
  CHECK(h.call<rvgl_rsp_spm_release>(RVGL_CMD_SPM_RELEASE, sr).hdr.result == -EPERM);
  rvgl_req_spm_set_dest sd{};
  CHECK(h.call<rvgl_rsp_spm_set_dest>(RVGL_CMD_SPM_SET_DEST, sd).hdr.result == -EPERM);
  // Unknown command ids: -ENOSYS and the context carries on.
  rvgl_req_nop unknown{};
  CHECK(h.call<rvgl_rsp_nop>(RVGL_CMD_COUNT + 5, unknown).hdr.result == -ENOSYS);

  // The context is still fine.
  CHECK(h.queue_state(queue).hdr.result == 0);
  rvgl_req_nop nop{};
  CHECK(h.call<rvgl_rsp_nop>(RVGL_CMD_NOP, nop).hdr.result == 0);
}

TEST_CASE("malformed blobs are refused", "[context][malformed]") {
  ContextHarness h;
  auto blob = [&](uint32_t mem, uint32_t flags, uint64_t id, uint64_t size,
                  std::span<const iovec> iov = {}) {
    BlobExport e;
    return h.create_blob(h.next_res_id(), mem, flags, id, size, &e, iov);
  };
  // Shared page: wrong flags or size.
  CHECK(blob(RVGL_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_SHAREABLE, 0, RVGL_SHMEM_SIZE) == -EINVAL);
  CHECK(blob(RVGL_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_MAPPABLE, 0, 4096) == -EINVAL);
  h.create_shmem();
  CHECK(blob(RVGL_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_MAPPABLE, 0, RVGL_SHMEM_SIZE) == -EINVAL);
  // Claims: unknown id, wrong size, twice, non-mappable VRAM as MAPPABLE.
  CHECK(blob(RVGL_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_MAPPABLE, 12345, 4096) == -ENOENT);
  int32_t r;
  h.bo_create(8192, RVGL_DOMAIN_GTT, 0, 5, &r);
  REQUIRE(r == 0);
  CHECK(blob(RVGL_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_MAPPABLE, 5, 4096) == -EINVAL);
  CHECK(blob(RVGL_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_MAPPABLE, 5, 8192) == 0);
  CHECK(blob(RVGL_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_MAPPABLE, 5, 8192) == -ENOENT);
  h.bo_create(8192, RVGL_DOMAIN_VRAM, RVGL_BO_FLAG_NO_CPU_ACCESS, 6, &r);
  REQUIRE(r == 0);
  CHECK(blob(RVGL_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_MAPPABLE, 6, 8192) == -EINVAL);
  // GTT the kernel would never map (NO_CPU_ACCESS): not mappable either, but shareable.
  h.bo_create(8192, RVGL_DOMAIN_GTT, RVGL_BO_FLAG_NO_CPU_ACCESS, 8, &r);
  REQUIRE(r == 0);
  CHECK(blob(RVGL_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_MAPPABLE, 8, 8192) == -EINVAL);
  CHECK(blob(RVGL_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_SHAREABLE, 8, 8192) == 0);
  // Userptr: no pages, sizes that do not add up, unaligned pages.
  alignas(4096) static uint8_t pages[3 * 4096];
  iovec one{pages, 4096};
  CHECK(blob(RVGL_BLOB_MEM_GUEST, RVGL_BLOB_FLAG_USERPTR, 0, 4096) == -EINVAL);
  CHECK(blob(RVGL_BLOB_MEM_GUEST, RVGL_BLOB_FLAG_USERPTR, 0, 8192, {&one, 1}) == -EINVAL);
  iovec odd{pages + 8, 4096};
  CHECK(blob(RVGL_BLOB_MEM_GUEST, RVGL_BLOB_FLAG_USERPTR, 0, 4096, {&odd, 1}) == -EINVAL);
  iovec wrap[2] = {{pages, 4096}, {pages, SIZE_MAX - 4095}};
  CHECK(blob(RVGL_BLOB_MEM_GUEST, RVGL_BLOB_FLAG_USERPTR, 0, 8192, wrap) == -EINVAL);
  // GUEST blobs without the userptr flag are not ours to make.
  CHECK(blob(RVGL_BLOB_MEM_GUEST, 0, 0, 4096, {&one, 1}) == -EINVAL);
  CHECK(blob(7, RVGL_BLOB_FLAG_USE_MAPPABLE, 5, 8192) == -EINVAL);
}
