// Another real context type in the same process: a venus context of the real library (Debian's
// lavapipe behind it) is created, used and destroyed while a ROCM context runs, and neither
// notices the other.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <vector>

#include "../../tools/common/amd_packets.h"
#include "renderer_fixture.h"
#include "rocm_guest.h"

using namespace rvgl::hooks_test;
namespace pk = rvgl::packets;

namespace {
constexpr uint32_t kVenus = 4;
constexpr uint64_t kSize = 64 * 1024;
}  // namespace

TEST_CASE("a venus context runs beside a ROCM context", "[hooks][venus]") {
  RealApi real;
  Renderer::Options o;
  o.flags = VIRGL_RENDERER_NO_VIRGL | VIRGL_RENDERER_VENUS | VIRGL_RENDERER_THREAD_SYNC;
  Renderer r(o);
  REQUIRE(r.result() == 0);

  // ROCM context with work in flight on the emulated GPU.
  RocmGuest g(1, 100);
  g.start();
  auto [buf_bo, buf_res] = g.bo_blob(kSize, RVGL_DOMAIN_GTT);
  auto [ib_bo, ib_res] = g.bo_blob(kSize, RVGL_DOMAIN_GTT);
  auto *buf = static_cast<uint32_t *>(g.map(buf_res, kSize));
  auto *ib = static_cast<uint32_t *>(g.map(ib_res, kSize));
  const uint64_t va = g.caps().va_start;
  REQUIRE(g.va_map(buf_bo, 0, va, kSize) == 0);
  REQUIRE(g.va_map(ib_bo, 0, va + kSize, kSize, RVGL_VA_FLAG_READ | RVGL_VA_FLAG_EXECUTE) == 0);
  const uint32_t q = g.queue_create(RVGL_IP_COMPUTE, 1);
  std::vector<uint32_t> w;
  pk::pm4_write_data(w, va, {0x11111111u, 0x22222222u});
  std::memcpy(ib, w.data(), w.size() * 4);
  g.submit(q, va + kSize, w.size());
  REQUIRE(g.fence(1, 1) == 0);

  // Venus: the capset reads the same with and without us, the context lives and dies.
  uint32_t ours_ver = 0, ours_size = 0, real_ver = 1, real_size = 1;
  virgl_renderer_get_cap_set(kVenus, &ours_ver, &ours_size);
  real.get_cap_set(kVenus, &real_ver, &real_size);
  REQUIRE(ours_size > 0);
  CHECK(ours_ver == real_ver);
  CHECK(ours_size == real_size);
  std::vector<uint8_t> a(ours_size), b(ours_size);
  virgl_renderer_fill_caps(kVenus, 0, a.data());
  real.fill_caps(kVenus, 0, b.data());
  CHECK(a == b);
  REQUIRE(virgl_renderer_context_create_with_flags(2, kVenus, 5, "venus") == 0);
  uint32_t empty = 0;
  CHECK(virgl_renderer_submit_cmd(&empty, 2, 0) == 0);
  REQUIRE(virgl_renderer_context_create_fence(2, 0, 0, 500) == 0);
  CHECK(r.wait_context_fence(2, 0, 500));

  // Both complete; the venus fence went to the VMM's callback for ctx 2, ours for ctx 1.
  REQUIRE(r.wait_context_fence(1, 1, 1));
  CHECK(buf[0] == 0x11111111u);
  CHECK(buf[1] == 0x22222222u);
  virgl_renderer_context_destroy(2);
  CHECK(virgl_renderer_submit_cmd(&empty, 2, 0) == EINVAL);

  // The ROCM context carries on after the venus context is gone.
  w.clear();
  pk::pm4_write_data(w, va + 8, {0x33333333u});
  std::memcpy(ib, w.data(), w.size() * 4);
  g.submit(q, va + kSize, w.size());
  REQUIRE(g.fence(1, 2) == 0);
  REQUIRE(r.wait_context_fence(1, 1, 2));
  CHECK(buf[2] == 0x33333333u);
  for (const auto &f : r.fences().snapshot())
    CHECK((f.ctx_id == 1 || f.ctx_id == 2));
}
