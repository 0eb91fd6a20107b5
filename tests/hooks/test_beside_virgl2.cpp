// The display path beside ours: vrend (a VIRGL2 context) in the same process as a ROCM context.
// vrend needs EGL; where it cannot start (no render node and no software EGL), the test says it
// was skipped and why. Its own executable, so EGL's process-wide state meets no other test.
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
constexpr uint32_t kVirgl = 1, kVirgl2 = 2;
constexpr uint32_t kPipeBuffer = 0;      // PIPE_BUFFER
constexpr uint32_t kFormatR8Unorm = 64;  // VIRGL_FORMAT_R8_UNORM
constexpr uint32_t kBindVertexBuffer = 1u << 4;
}  // namespace

TEST_CASE("a VIRGL2 context runs beside a ROCM context where EGL works", "[hooks][virgl2]") {
  ScopedEnv co("RVGL_COMPUTE_ONLY", "0");  // the VMM's GL flags go through unchanged
  // The emulated render node answers Mesa's device queries like amdgpu, so radeonsi would load
  // and submit graphics IBs, which the emulator (compute packets only) rejects. vrend gets
  // Mesa's software rasteriser instead; on a real GPU this test runs on radeonsi unchanged.
  ScopedEnv sw("LIBGL_ALWAYS_SOFTWARE", "1");
  RealApi real;
  Renderer::Options o;
  o.flags = VIRGL_RENDERER_USE_EGL | VIRGL_RENDERER_USE_SURFACELESS | VIRGL_RENDERER_THREAD_SYNC;
  Renderer r(o);
  if (r.result() != 0) {
    WARN("skipped: virgl_renderer_init(USE_EGL | USE_SURFACELESS) failed ("
         << r.result() << "): vrend found no EGL here (no render node and no surfaceless "
         << "software EGL such as Mesa's libegl-mesa0); the venus test covers a second context "
         << "type");
    return;
  }

  // vrend's capsets read the same through us, now that vrend is initialised.
  for (uint32_t set : {kVirgl, kVirgl2}) {
    uint32_t ov = 0, os = 0, rv = 1, rs = 1;
    virgl_renderer_get_cap_set(set, &ov, &os);
    real.get_cap_set(set, &rv, &rs);
    CHECK(ov == rv);
    CHECK(os == rs);
    std::vector<uint8_t> a(os), b(os);
    virgl_renderer_fill_caps(set, ov, a.data());
    real.fill_caps(set, rv, b.data());
    CHECK(a == b);
  }

  RocmGuest g(1, 100);
  g.start();

  REQUIRE(virgl_renderer_context_create_with_flags(2, kVirgl2, 4, "gl2") == 0);
  virgl_renderer_resource_create_args res{};
  res.handle = 50;
  res.target = kPipeBuffer;
  res.format = kFormatR8Unorm;
  res.bind = kBindVertexBuffer;
  res.width = 4096;
  res.height = res.depth = res.array_size = 1;
  REQUIRE(virgl_renderer_resource_create(&res, nullptr, 0) == 0);
  virgl_renderer_ctx_attach_resource(2, 50);
  uint32_t empty = 0;
  CHECK(virgl_renderer_submit_cmd(&empty, 2, 0) == 0);
  virgl_renderer_resource_info info{};
  CHECK(virgl_renderer_resource_get_info(50, &info) == 0);  // the real library's answer
  CHECK(info.width == 4096);
  // Attaching vrend's (non-blob) buffer to the ROCM context is harmless: nothing to import.
  virgl_renderer_ctx_attach_resource(1, 50);
  CHECK(g.va_map(0, 50, g.caps().va_start, 4096) == -ENOENT);

  // A ROCM fence retires while vrend is live.
  REQUIRE(g.fence(0, 3) == 0);
  REQUIRE(r.wait_context_fence(1, 0, 3));
  virgl_renderer_resource_unref(50);
  virgl_renderer_context_destroy(2);
  virgl_renderer_context_destroy(1);
}
