// Cross-path sharing (DESIGN.md D1): a resource we do not own, attached to a ROCM context, is
// imported from the real library's export_blob as a dma-buf; ours export as dma-bufs. And ids
// stay one namespace with the real library.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "../../tools/common/amd_packets.h"
#include "renderer_fixture.h"
#include "rocm_guest.h"

using namespace rvgl::hooks_test;
namespace pk = rvgl::packets;

namespace {

constexpr uint64_t kSize = 64 * 1024;

Renderer::Options venus_and_rocm() {
  Renderer::Options o;
  o.flags = VIRGL_RENDERER_NO_VIRGL | VIRGL_RENDERER_VENUS;
  return o;
}

// Has `g` write `value` over [0, kSize) of the object at `va` with SDMA, and waits for it.
void gpu_fill(Renderer &r, RocmGuest &g, uint64_t va, uint32_t value, uint64_t fence_id) {
  auto [ib_bo, ib_res] = g.bo_blob(kSize, RVGL_DOMAIN_GTT);
  auto *ib = static_cast<uint32_t *>(g.map(ib_res, kSize));
  const uint64_t ib_va = g.caps().va_start + 64 * kSize;
  REQUIRE(g.va_map(ib_bo, 0, ib_va, kSize, RVGL_VA_FLAG_READ | RVGL_VA_FLAG_EXECUTE) == 0);
  std::vector<uint32_t> fill;
  pk::sdma_const_fill(fill, va, value, kSize);
  pk::sdma_pad(fill);
  std::memcpy(ib, fill.data(), fill.size() * 4);
  const uint32_t q = g.queue_create(RVGL_IP_SDMA, 5);
  g.submit(q, ib_va, fill.size());
  REQUIRE(g.fence(5, fence_id) == 0);
  REQUIRE(r.wait_context_fence(g.ctx_id(), 5, fence_id));
}

}  // namespace

TEST_CASE("a resource of another ROCM context is attached as a dma-buf", "[hooks][sharing]") {
  Renderer r(venus_and_rocm());
  REQUIRE(r.result() == 0);
  RocmGuest a(1, 100), b(2, 200);
  a.start();
  b.start();
  auto [bo, res] = a.bo_blob(kSize, RVGL_DOMAIN_VRAM, RVGL_BO_FLAG_CPU_ACCESS);
  auto *mem = static_cast<uint32_t *>(a.map(res, kSize));
  std::memset(mem, 0, kSize);

  virgl_renderer_ctx_attach_resource(2, static_cast<int>(res));
  const uint64_t va = b.caps().va_start;
  REQUIRE(b.va_map(0, res, va, kSize) == 0);  // b names it by resource id
  gpu_fill(r, b, va, 0xabcd1234u, 7);
  CHECK(mem[0] == 0xabcd1234u);
  CHECK(mem[kSize / 4 - 1] == 0xabcd1234u);

  // Detached from b: b may no longer name it; a still has it.
  virgl_renderer_ctx_detach_resource(2, static_cast<int>(res));
  CHECK(b.va_map(0, res, va + 2 * kSize, kSize) == -ENOENT);
  CHECK(a.va_map(0, res, a.caps().va_start, kSize) == 0);
}

TEST_CASE("a real-library resource is imported through its export_blob", "[hooks][sharing]") {
  Renderer r(venus_and_rocm());
  REQUIRE(r.result() == 0);
  RocmGuest a(1, 100), b(2, 200);
  a.start();
  b.start();
  auto [bo, res] = a.bo_blob(kSize, RVGL_DOMAIN_GTT);
  auto *mem = static_cast<uint32_t *>(a.map(res, kSize));
  std::memset(mem, 0, kSize);

  // Hand a's dma-buf to the real library as its own resource 300 (as a VMM importing a buffer
  // from elsewhere would), then attach that to b: b gets it from the real export_blob.
  uint32_t fd_type = 0;
  int fd = -1;
  REQUIRE(virgl_renderer_resource_export_blob(res, &fd_type, &fd) == 0);
  REQUIRE(fd_type == VIRGL_RENDERER_BLOB_FD_TYPE_DMABUF);
  virgl_renderer_resource_import_blob_args imp{};
  imp.res_handle = 300;
  imp.blob_mem = VIRGL_RENDERER_BLOB_MEM_HOST3D;
  imp.fd_type = VIRGL_RENDERER_BLOB_FD_TYPE_DMABUF;
  imp.fd = fd;
  imp.size = kSize;
  REQUIRE(virgl_renderer_resource_import_blob(&imp) == 0);  // the real library owns fd now
  RealApi real;
  uint32_t info = 0;
  CHECK(real.get_map_info(300, &info) == -EINVAL);  // the real library's resource, map_info 0

  virgl_renderer_ctx_attach_resource(2, 300);
  const uint64_t va = b.caps().va_start;
  REQUIRE(b.va_map(0, 300, va, kSize) == 0);
  gpu_fill(r, b, va, 0x600dcafeu, 9);
  CHECK(mem[0] == 0x600dcafeu);
  CHECK(mem[kSize / 4 - 1] == 0x600dcafeu);

  // The real library's unref detaches it from our contexts too.
  virgl_renderer_resource_unref(300);
  CHECK(b.va_map(0, 300, va + 2 * kSize, kSize) == -ENOENT);
}

TEST_CASE("ids are one namespace with the real library", "[hooks][sharing]") {
  Renderer r(venus_and_rocm());
  REQUIRE(r.result() == 0);
  RocmGuest g(1, 100);
  g.start();
  // A real (plain guest memory) resource 30 blocks our blob 30, and ours block theirs.
  std::vector<uint8_t> pages(4096);
  iovec iov{pages.data(), pages.size()};
  virgl_renderer_resource_create_blob_args plain{};
  plain.res_handle = 30;
  plain.blob_mem = VIRGL_RENDERER_BLOB_MEM_GUEST;
  plain.size = pages.size();
  plain.iovecs = &iov;
  plain.num_iovs = 1;
  REQUIRE(virgl_renderer_resource_create_blob(&plain) == 0);
  g.bo_create(4096, RVGL_DOMAIN_GTT, 0, 77);
  CHECK(g.create_blob(30, VIRGL_RENDERER_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_MAPPABLE, 77, 4096) ==
        -EINVAL);
  // Refused before the context saw it: the parked object is still there to claim.
  CHECK(g.create_blob(g.next_res_id(), VIRGL_RENDERER_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_MAPPABLE,
                      77, 4096) == 0);
  plain.res_handle = g.shmem_res();
  CHECK(virgl_renderer_resource_create_blob(&plain) == -EINVAL);
  virgl_renderer_resource_import_blob_args imp{};
  imp.res_handle = g.shmem_res();
  imp.blob_mem = VIRGL_RENDERER_BLOB_MEM_HOST3D;
  imp.fd_type = VIRGL_RENDERER_BLOB_FD_TYPE_SHM;
  imp.fd = 0;
  imp.size = 4096;
  CHECK(virgl_renderer_resource_import_blob(&imp) == -EINVAL);
  virgl_renderer_resource_create_args vrend{};
  vrend.handle = g.shmem_res();
  CHECK(virgl_renderer_resource_create(&vrend, nullptr, 0) == EINVAL);
  // Contexts likewise.
  REQUIRE(virgl_renderer_context_create_with_flags(5, 4, 0, "venus") == 0);
  CHECK(virgl_renderer_context_create_with_flags(5, RVGL_CAPSET_ID, 0, "") == EINVAL);
  CHECK(virgl_renderer_context_create_with_flags(1, 4, 0, "venus") == EINVAL);
  // A plain guest blob created by our context stays the real library's (no userptr flag).
  plain.res_handle = 31;
  plain.ctx_id = 1;
  REQUIRE(virgl_renderer_resource_create_blob(&plain) == 0);
  RealApi real;
  uint32_t info = 0;
  CHECK(real.get_map_info(31, &info) == 0);
  virgl_renderer_resource_unref(31);
  virgl_renderer_resource_unref(30);
  virgl_renderer_context_destroy(5);
}

TEST_CASE(
    "contexts sharing a buffer do not wait on each other's work: a handshake through it "
    "completes",
    "[hooks][sharing]") {
  // ROCm's IPC signals live in shared memory: one process's kernel waits on a value another's
  // writes. Our objects are created for explicit sync (as radv's are), so the kernel's implicit
  // sync does not make the writer wait for the waiter's job on the object both list, which
  // would hang them both until the lockup timeout.
  Renderer r(venus_and_rocm());
  REQUIRE(r.result() == 0);
  RocmGuest a(1, 100), b(2, 200);
  a.start();
  b.start();
  auto [bo, res] = a.bo_blob(kSize, RVGL_DOMAIN_GTT);
  auto *mem = static_cast<uint32_t *>(a.map(res, kSize));
  std::memset(mem, 0, kSize);
  virgl_renderer_ctx_attach_resource(2, static_cast<int>(res));
  const uint64_t a_va = a.caps().va_start, b_va = b.caps().va_start;
  REQUIRE(a.va_map(bo, 0, a_va, kSize) == 0);
  REQUIRE(b.va_map(0, res, b_va, kSize) == 0);

  // a: wait (SDMA memory poll) for the flag at word 0, then write 2 at word 1.
  auto [a_ib_bo, a_ib_res] = a.bo_blob(kSize, RVGL_DOMAIN_GTT);
  const uint64_t a_ib_va = a_va + 4 * kSize;
  REQUIRE(a.va_map(a_ib_bo, 0, a_ib_va, kSize, RVGL_VA_FLAG_READ | RVGL_VA_FLAG_EXECUTE) == 0);
  std::vector<uint32_t> wait_then_write;
  pk::sdma_poll_mem_equal(wait_then_write, a_va, 1, 0xffffffffu);
  pk::sdma_write_linear(wait_then_write, a_va + 4, {2});
  pk::sdma_pad(wait_then_write);
  std::memcpy(a.map(a_ib_res, kSize), wait_then_write.data(), wait_then_write.size() * 4);
  // b: write the flag (PM4, another engine).
  auto [b_ib_bo, b_ib_res] = b.bo_blob(kSize, RVGL_DOMAIN_GTT);
  const uint64_t b_ib_va = b_va + 4 * kSize;
  REQUIRE(b.va_map(b_ib_bo, 0, b_ib_va, kSize, RVGL_VA_FLAG_READ | RVGL_VA_FLAG_EXECUTE) == 0);
  std::vector<uint32_t> flag;
  pk::pm4_write_data(flag, b_va, {1});
  std::memcpy(b.map(b_ib_res, kSize), flag.data(), flag.size() * 4);

  const uint32_t qa = a.queue_create(RVGL_IP_SDMA, 1);
  const uint32_t qb = b.queue_create(RVGL_IP_COMPUTE, 1);
  a.submit(qa, a_ib_va, wait_then_write.size());
  REQUIRE(a.fence(1, 1) == 0);
  b.submit(qb, b_ib_va, flag.size());
  REQUIRE(b.fence(1, 1) == 0);
  CHECK(r.wait_context_fence(2, 1, 1, std::chrono::seconds(5)));
  CHECK(r.wait_context_fence(1, 1, 1, std::chrono::seconds(5)));
  CHECK(mem[0] == 1);
  CHECK(mem[1] == 2);
  for (auto [g, q] : {std::pair<RocmGuest *, uint32_t>{&a, qa}, {&b, qb}}) {
    rvgl_req_queue_state qs{};
    qs.queue = q;
    const auto st = g->call<rvgl_rsp_queue_state>(RVGL_CMD_QUEUE_STATE, qs);
    CHECK(st.hdr.result == 0);
    CHECK(st.state == RVGL_QUEUE_STATE_OK);
  }
}

TEST_CASE("a blob another context imported stays charged to its maker until the import goes",
          "[hooks][sharing][quota]") {
  // The router hands the maker's charge to the importing context: freed and unref'd by its
  // maker, memory another context still maps must count against the maker's quota.
  ScopedEnv gtt("RVGL_MAX_GTT_MB", "1");
  Renderer r(venus_and_rocm());
  REQUIRE(r.result() == 0);
  RocmGuest a(1, 100), b(2, 200);
  a.start();
  b.start();
  auto gtt_used = [&] {
    rvgl_req_query_info q{};
    q.query = RVGL_INFO_USAGE;
    const auto u = a.call<rvgl_rsp_query_info>(RVGL_CMD_QUERY_INFO, q);
    REQUIRE(u.hdr.result == 0);
    return u.data.usage.gtt_bytes;
  };
  constexpr uint64_t kMiB = 1ull << 20;
  for (int round = 0; round < 5; ++round) {
    INFO("round " << round);
    auto [bo, res] = a.bo_blob(kMiB, RVGL_DOMAIN_GTT);
    virgl_renderer_ctx_attach_resource(2, static_cast<int>(res));
    const uint64_t va = b.caps().va_start;
    REQUIRE(b.va_map(0, res, va, kMiB) == 0);
    rvgl_req_bo_free f{};
    f.bo = bo;
    REQUIRE(a.call<rvgl_rsp_bo_free>(RVGL_CMD_BO_FREE, f).hdr.result == 0);
    virgl_renderer_resource_unref(res);
    CHECK(gtt_used() == kMiB);
    rvgl_req_bo_create more{};
    more.size = 4096;
    more.domain = RVGL_DOMAIN_GTT;
    CHECK(a.call<rvgl_rsp_bo_create>(RVGL_CMD_BO_CREATE, more).hdr.result == -ENOSPC);
    rvgl_req_va_unmap u{};
    u.va = va;
    u.size = kMiB;
    REQUIRE(b.call<rvgl_rsp_va_unmap>(RVGL_CMD_VA_UNMAP, u).hdr.result == 0);
    CHECK(gtt_used() == 0);
  }
}
