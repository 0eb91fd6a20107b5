// What a VMM or a guest can get wrong, through the public API: every bad value is an error
// answer, the context (and the host) carries on.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <tuple>
#include <vector>

#include "../../tools/common/amd_packets.h"
#include "rvgl_emu.h"
#include "guest_pages.h"
#include "renderer_fixture.h"
#include "rocm_guest.h"

using namespace rvgl::hooks_test;
namespace pk = rvgl::packets;

namespace {

constexpr uint64_t kSize = 64 * 1024;

Renderer::Options plain() {
  Renderer::Options o;
  o.flags = VIRGL_RENDERER_NO_VIRGL;
  return o;
}

int32_t nop(RocmGuest &g) {
  return g.call<rvgl_rsp_nop>(RVGL_CMD_NOP, rvgl_req_nop{}).hdr.result;
}

// A GTT target at the start of the guest's VA and an IB blob mapped after it, whose SDMA program
// fills `fill_bytes` of the target with `value` `repeat` times; the program's dwords in `dwords`.
struct SdmaFill {
  uint32_t bo = 0, res = 0, ib_bo = 0, ib_res = 0;
  uint64_t va = 0;
  size_t dwords = 0;
  SdmaFill(RocmGuest &g, uint32_t value, uint64_t fill_bytes, int repeat = 1) {
    std::tie(bo, res) = g.bo_blob(kSize, RVGL_DOMAIN_GTT);
    std::tie(ib_bo, ib_res) = g.bo_blob(kSize, RVGL_DOMAIN_GTT);
    auto *ib = static_cast<uint32_t *>(g.map(ib_res, kSize));
    va = g.caps().va_start;
    REQUIRE(g.va_map(bo, 0, va, kSize) == 0);
    REQUIRE(g.va_map(ib_bo, 0, va + kSize, kSize, RVGL_VA_FLAG_READ | RVGL_VA_FLAG_EXECUTE) == 0);
    std::vector<uint32_t> fill;
    for (int i = 0; i < repeat; ++i)
      pk::sdma_const_fill(fill, va, value, fill_bytes);
    pk::sdma_pad(fill);
    std::memcpy(ib, fill.data(), fill.size() * 4);
    dwords = fill.size();
  }
  uint64_t ib_va() const { return va + kSize; }
};

}  // namespace

TEST_CASE("malformed command buffers fail the submit, not the context", "[hooks][robust]") {
  Renderer r(plain());
  REQUIRE(r.result() == 0);
  RocmGuest g(1, 100);
  g.start();
  const uint32_t errors = g.shmem_header().async_error;

  std::vector<uint8_t> bad(32, 0xff);  // a header whose length runs past the buffer
  CHECK(g.submit_raw(bad) == -EINVAL);
  CHECK(g.shmem_header().async_error == errors + 1);
  uint32_t dw[8] = {};
  CHECK(virgl_renderer_submit_cmd(dw, 1, -1) == EINVAL);
  CHECK(virgl_renderer_submit_cmd(nullptr, 1, 8) == EINVAL);
  CHECK(virgl_renderer_submit_cmd(dw, 1, 0) == 0);  // empty: nothing to do
  // submit_cmd2 (1.x): dword alignment, and no in-fences for this context type.
  auto *odd = reinterpret_cast<uint8_t *>(dw) + 2;
  CHECK(virgl_renderer_submit_cmd2(odd, 1, 0, nullptr, 0) == EFAULT);
  uint64_t in_fence = 1;
  CHECK(virgl_renderer_submit_cmd2(dw, 1, 0, &in_fence, 1) == -EINVAL);
  CHECK(nop(g) == 0);  // still serving
}

TEST_CASE("bad blob arguments are refused", "[hooks][robust]") {
  Renderer r(plain());
  REQUIRE(r.result() == 0);
  RocmGuest g(1, 100);
  g.start();
  const uint32_t host3d = VIRGL_RENDERER_BLOB_MEM_HOST3D, guest = VIRGL_RENDERER_BLOB_MEM_GUEST;
  const uint32_t mappable = RVGL_BLOB_FLAG_USE_MAPPABLE, userptr = RVGL_BLOB_FLAG_USERPTR;
  CHECK(g.create_blob(0, host3d, mappable, 0, RVGL_SHMEM_SIZE) == -EINVAL);    // res 0
  CHECK(g.create_blob(150, host3d, mappable, 0, 0) == -EINVAL);                // size 0
  CHECK(g.create_blob(150, host3d, mappable, 0, RVGL_SHMEM_SIZE) == -EINVAL);  // 2nd page
  CHECK(g.create_blob(g.shmem_res(), host3d, mappable, 5, 4096) == -EINVAL);   // id taken
  CHECK(g.create_blob(150, host3d, mappable, 12345, 4096) == -ENOENT);         // no such BO
  std::vector<uint8_t> mem(8192);
  iovec iov{mem.data(), mem.size()};
  CHECK(g.create_blob(150, host3d, mappable, 12345, 4096, &iov, 1) == -EINVAL);  // iovs on HOST3D
  CHECK(g.create_blob(150, guest, userptr, 0, 8192, nullptr, 1) == -EINVAL);     // no iovecs
  CHECK(g.create_blob(150, guest, userptr, 0, 8192, &iov, 0) == -EINVAL);
  CHECK(g.create_blob(150, guest, userptr, 0, 4096, &iov, 1) == -EINVAL);  // sizes differ
  CHECK(g.create_blob(150, VIRGL_RENDERER_BLOB_MEM_HOST3D_GUEST, mappable, 0, 8192, &iov, 1) ==
        -EINVAL);  // host+guest storage without userptr: nothing of ours
  virgl_renderer_resource_info info{};
  CHECK(virgl_renderer_resource_get_info(static_cast<int>(g.shmem_res()), nullptr) == EINVAL);
  CHECK(virgl_renderer_resource_get_info(static_cast<int>(g.shmem_res()), &info) == 0);
  CHECK(nop(g) == 0);
}

TEST_CASE("fence arguments and callback versions", "[hooks][robust]") {
  SECTION("callbacks version 2: no write_context_fence, so no context fences") {
    Renderer::Options o = plain();
    o.callbacks_version = 2;
    Renderer r(o);
    REQUIRE(r.result() == 0);
    RocmGuest g(1, 100);
    g.start();
    CHECK(g.fence(0, 1) == -EINVAL);
    CHECK(nop(g) == 0);
  }
  SECTION("ring indices beyond 63 are refused") {
    Renderer r(plain());
    REQUIRE(r.result() == 0);
    RocmGuest g(1, 100);
    g.start();
    CHECK(g.fence(64, 1) == -EINVAL);
    CHECK(g.fence(~0u, 1) == -EINVAL);
    CHECK(g.fence(63, 1) == 0);
  }
}

TEST_CASE("the VMM's get_drm_fd chooses the node; a non-amdgpu fd falls back", "[hooks][robust]") {
  Renderer::Options o = plain();
  SECTION("an amdgpu render node") {
    o.drm_node = "/dev/dri/renderD128";
  }
  SECTION("not a GPU at all") {
    o.drm_node = "/dev/null";
  }
  Renderer r(o);
  REQUIRE(r.result() == 0);
  RocmGuest g(1, 100);
  REQUIRE_NOTHROW(g.start());
  CHECK(nop(g) == 0);
}

TEST_CASE("mappings: map_fixed, unref while mapped, export queries", "[hooks][robust]") {
  Renderer r(plain());
  REQUIRE(r.result() == 0);
  RocmGuest g(1, 100);
  g.start();
  auto [bo, res] = g.bo_blob(kSize, RVGL_DOMAIN_GTT);

  // map_fixed (1.3): placed where the VMM says, over its reservation.
  void *window = mmap(nullptr, kSize, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(window != MAP_FAILED);
  REQUIRE(virgl_renderer_resource_map_fixed(res, window) == 0);
  auto *w = static_cast<uint32_t *>(window);
  w[3] = 0x5eed;
  auto *m = static_cast<uint32_t *>(g.map(res, kSize));
  CHECK(m[3] == 0x5eed);  // same memory through both mappings
  munmap(window, kSize);

  // The export query says what the real library says of untyped blobs.
  virgl_renderer_export_query q{};
  q.hdr.stype = VIRGL_RENDERER_STRUCTURE_TYPE_EXPORT_QUERY;
  q.hdr.size = sizeof(q);
  q.in_resource_id = res;
  CHECK(virgl_renderer_execute(&q, sizeof(q)) == 0);
  CHECK(q.out_num_fds == 1);
  CHECK(q.out_fourcc == 0);
  q.in_export_fds = 1;
  CHECK(virgl_renderer_execute(&q, sizeof(q)) == -EINVAL);

  // Unref of a mapped resource drops the mapping with it; the id is then unknown.
  virgl_renderer_resource_unref(res);
  CHECK(virgl_renderer_resource_unmap(res) == -EINVAL);
  void *p = nullptr;
  uint64_t size = 0;
  CHECK(virgl_renderer_resource_map(res, &p, &size) == -EINVAL);
  CHECK(virgl_renderer_resource_map_fixed(res, window) == -ENOSYS);  // nobody's: 0.10.4's answer
  CHECK(virgl_renderer_get_cursor_data(g.shmem_res(), nullptr, nullptr) == nullptr);
}

TEST_CASE("destroy with work queued, then reset, then start again", "[hooks][robust]") {
  Renderer r(plain());
  REQUIRE(r.result() == 0);
  {
    RocmGuest g(1, 100);
    g.start();
    const SdmaFill f(g, 0x77u, kSize, 16);
    const uint32_t res = f.res;
    const uint32_t q = g.queue_create(RVGL_IP_SDMA, 1);
    for (int i = 0; i < 8; ++i)
      g.submit(q, f.ib_va(), f.dwords);
    REQUIRE(g.fence(1, 1) == 0);
    virgl_renderer_context_destroy(1);  // while the queue may still run
    // Its resources outlive it until the VMM lets go of them.
    uint32_t fd_type = 0;
    int fd = -1;
    CHECK(virgl_renderer_resource_export_blob(res, &fd_type, &fd) == 0);
    close(fd);
  }
  virgl_renderer_reset();  // takes our remaining resources too
  uint32_t info = 0;
  CHECK(virgl_renderer_resource_get_map_info(100, &info) == -EINVAL);
  RocmGuest again(1, 100);  // same ids are free again
  REQUIRE_NOTHROW(again.start());
  CHECK(nop(again) == 0);
}

TEST_CASE("a context destroyed inside its fence callback is told nothing more", "[hooks][robust]") {
  // A poll-mode VMM may tear a context down from write_context_fence (the guest died, a fence
  // said so). After destroy returns, nothing more may reach it for that context: not the rest of
  // the batch its poll took, not a second look of that poll; and once the VMM has also unref'd a
  // userptr blob, the guest's pages are its own again, although the poll has not returned. Two
  // rings' fences retire in one poll; the first callback destroys the context and drops the
  // blob. Repeated, as the order of the two jobs' completions varies. The same for a VMM that
  // resets the renderer from the callback instead: reset ends every context as destroy does.
  const bool reset = GENERATE(false, true);
  Renderer r(plain());
  REQUIRE(r.result() == 0);
  for (uint32_t round = 0; round < 20; ++round) {
    INFO("round " << round);
    const uint32_t ctx = 1 + round;
    RocmGuest g(ctx, 100 + 10 * round);
    g.start();
    const SdmaFill f(g, 0x55u, 4096);
    const uint64_t va = f.va;
    // Guest RAM handed over as a userptr blob and mapped for the GPU.
    GuestPages pages(kSize);
    const iovec iov{pages.ptr, kSize};
    const uint32_t ures = g.next_res_id();
    rvgl_emu_counters c0{}, c{};
    rvgl_emu_get_counters(&c0, sizeof c0);
    const uint64_t userptrs_before = c0.userptr_alive;
    REQUIRE(g.create_blob(ures, VIRGL_RENDERER_BLOB_MEM_GUEST, RVGL_BLOB_FLAG_USERPTR, 0, kSize,
                          &iov, 1) == 0);
    REQUIRE(g.va_map(0, ures, va + 2 * kSize, kSize) == 0);
    rvgl_emu_get_counters(&c, sizeof c);
    REQUIRE(c.userptr_alive == userptrs_before + 1);
    const uint64_t contexts_before = c.contexts_alive;  // before the queues' kernel contexts
    const uint32_t q1 = g.queue_create(RVGL_IP_SDMA, 1);
    const uint32_t q2 = g.queue_create(RVGL_IP_SDMA, 2);
    rvgl_emu_get_counters(&c0, sizeof c0);
    g.submit(q1, f.ib_va(), f.dwords);
    g.submit(q2, f.ib_va(), f.dwords);
    REQUIRE(g.fence(1, 7) == 0);
    REQUIRE(g.fence(2, 8) == 0);
    // Both jobs done before the VMM polls, so one poll finds both fences.
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    do {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      rvgl_emu_get_counters(&c, sizeof c);
    } while (c.jobs_completed - c0.jobs_completed < 2 && std::chrono::steady_clock::now() < end);
    REQUIRE(c.jobs_completed - c0.jobs_completed == 2);

    uint32_t told = 0;
    // The emulated kernel's, once destroy and unref returned: userptr objects, and the kernel
    // contexts of the two queues (the context's own, counted before, lives with the object).
    uint64_t userptrs_left = UINT64_MAX, queue_contexts_left = UINT64_MAX;
    r.after_context_fence([&](uint32_t c_id, uint32_t, uint64_t) {
      if (c_id != ctx || ++told != 1) return;
      if (reset) {
        virgl_renderer_reset();
      } else {
        virgl_renderer_context_destroy(ctx);
        virgl_renderer_resource_unref(ures);
      }
      rvgl_emu_counters now{};
      rvgl_emu_get_counters(&now, sizeof now);
      userptrs_left = now.userptr_alive - userptrs_before;
      queue_contexts_left = now.contexts_alive - contexts_before;
    });
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!told && std::chrono::steady_clock::now() < until) {
      pollfd p{virgl_renderer_context_get_poll_fd(ctx), POLLIN, 0};
      ::poll(&p, 1, 20);
      virgl_renderer_context_poll(ctx);
    }
    for (int i = 0; i < 5; ++i)
      virgl_renderer_poll();  // the VMM's timer, after the destroy
    r.after_context_fence(nullptr);
    CHECK(told == 1);
    CHECK(userptrs_left == 0);
    CHECK(queue_contexts_left == 0);
    for (uint32_t id : {f.res, f.ib_res, g.shmem_res()})
      virgl_renderer_resource_unref(id);
  }
}

TEST_CASE("a VMM polling contexts from inside a fence callback neither deadlocks nor loses fences",
          "[hooks][robust]") {
  // From A's first callback the VMM polls A again and then B (B's fence is delivered inside
  // it); A's second callback destroys A. The destroy must not wait for the delivery it is part
  // of, the nested poll of A must leave A's batch to the outer poll, and every fence is told
  // exactly once.
  Renderer r(plain());
  REQUIRE(r.result() == 0);
  for (uint32_t round = 0; round < 10; ++round) {
    INFO("round " << round);
    const uint32_t ca = 1 + 2 * round, cb = 2 + 2 * round;
    RocmGuest a(ca, 100 + 20 * round), b(cb, 110 + 20 * round);
    a.start();
    b.start();
    const SdmaFill fa(a, 0x11u, 4096), fb(b, 0x22u, 4096);
    const uint32_t qa1 = a.queue_create(RVGL_IP_SDMA, 1), qa2 = a.queue_create(RVGL_IP_SDMA, 2);
    const uint32_t qb = b.queue_create(RVGL_IP_SDMA, 1);
    rvgl_emu_counters c0{}, c{};
    rvgl_emu_get_counters(&c0, sizeof c0);
    a.submit(qa1, fa.ib_va(), fa.dwords);
    a.submit(qa2, fa.ib_va(), fa.dwords);
    b.submit(qb, fb.ib_va(), fb.dwords);
    REQUIRE(a.fence(1, 7) == 0);
    REQUIRE(a.fence(2, 8) == 0);
    REQUIRE(b.fence(1, 9) == 0);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    do {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      rvgl_emu_get_counters(&c, sizeof c);
    } while (c.jobs_completed - c0.jobs_completed < 3 && std::chrono::steady_clock::now() < end);
    REQUIRE(c.jobs_completed - c0.jobs_completed == 3);

    std::vector<std::pair<uint32_t, uint64_t>> told;
    uint32_t told_a = 0;
    r.after_context_fence([&](uint32_t ctx, uint32_t, uint64_t id) {
      told.emplace_back(ctx, id);
      if (ctx != ca) return;
      if (++told_a == 1) {
        virgl_renderer_context_poll(ca);
        virgl_renderer_context_poll(cb);
      } else if (told_a == 2) {
        virgl_renderer_context_destroy(ca);
      }
    });
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    auto has = [&](uint32_t ctx, uint64_t id) {
      return std::count(told.begin(), told.end(), std::make_pair(ctx, id));
    };
    while ((told_a < 2 || !has(cb, 9)) && std::chrono::steady_clock::now() < until) {
      pollfd p{virgl_renderer_context_get_poll_fd(ca), POLLIN, 0};
      ::poll(&p, 1, 20);
      if (told_a < 2) virgl_renderer_context_poll(ca);
      virgl_renderer_context_poll(cb);
    }
    for (int i = 0; i < 5; ++i)
      virgl_renderer_poll();
    r.after_context_fence(nullptr);
    CHECK(told.size() == 3);
    CHECK(has(ca, 7) == 1);
    CHECK(has(ca, 8) == 1);
    CHECK(has(cb, 9) == 1);
    virgl_renderer_context_destroy(cb);
    for (uint32_t id : {fa.res, fa.ib_res, a.shmem_res(), fb.res, fb.ib_res, b.shmem_res()})
      virgl_renderer_resource_unref(id);
  }
}

TEST_CASE("detach_iov hands a userptr blob's iovecs back, the pages let go first",
          "[hooks][robust]") {
  // QEMU asks for the iovecs before it unrefs a resource (and on DETACH_BACKING) and unmaps what
  // it gets back: the real library returns the array the VMM gave it. Ours did not (QEMU leaked
  // each blob's mapping), and must revoke every use of the pages before handing them back.
  Renderer r(plain());
  REQUIRE(r.result() == 0);
  RocmGuest g(1, 100);
  g.start();
  GuestPages pages(kSize);
  iovec iov{pages.ptr, kSize};
  rvgl_emu_counters c0{}, c{};
  rvgl_emu_get_counters(&c0, sizeof c0);
  const uint32_t res = g.next_res_id();
  REQUIRE(g.create_blob(res, VIRGL_RENDERER_BLOB_MEM_GUEST, RVGL_BLOB_FLAG_USERPTR, 0, kSize, &iov,
                        1) == 0);
  const uint64_t va = g.caps().va_start;
  REQUIRE(g.va_map(0, res, va, kSize) == 0);
  rvgl_emu_get_counters(&c, sizeof c);
  REQUIRE(c.userptr_alive == c0.userptr_alive + 1);

  iovec *back = nullptr;
  int n = -1;
  virgl_renderer_resource_detach_iov(static_cast<int>(res), &back, &n);
  CHECK(back == &iov);
  CHECK(n == 1);
  rvgl_emu_get_counters(&c, sizeof c);
  CHECK(c.userptr_alive == c0.userptr_alive);             // revoked before it returned
  CHECK(g.va_map(0, res, va + kSize, kSize) == -ENOENT);  // the guest can no longer name it
  // Once only; the resource itself lives until unref. A host blob has no iovecs to give.
  virgl_renderer_resource_detach_iov(static_cast<int>(res), &back, &n);
  CHECK(back == nullptr);
  CHECK(n == 0);
  back = &iov;
  virgl_renderer_resource_detach_iov(static_cast<int>(g.shmem_res()), &back, &n);
  CHECK(back == nullptr);
  CHECK(n == 0);
  CHECK(nop(g) == 0);
  virgl_renderer_resource_unref(res);
  virgl_renderer_resource_unref(g.shmem_res());
  virgl_renderer_context_destroy(1);
}
