// Everything that is not ours reaches the real libvirglrenderer 0.10.4 unchanged, and ids are
// one namespace shared with it. These tests need no GPU.
#include <catch2/catch.hpp>

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "renderer_fixture.h"

using namespace rvgl::hooks_test;

namespace {

constexpr uint32_t kVenus = 4;  // VIRGL_RENDERER_CAPSET_VENUS

Renderer::Options venus_only() {
  Renderer::Options o;
  o.flags = VIRGL_RENDERER_NO_VIRGL | VIRGL_RENDERER_VENUS;
  return o;
}

}  // namespace

TEST_CASE("real capsets read the same with and without our library", "[hooks][passthrough]") {
  ScopedEnv co("RVGL_COMPUTE_ONLY", nullptr);
  RealApi real;
  auto compare_all = [&] {
    for (uint32_t set : {0u, 1u, 2u, 3u, 4u, 5u, 6u, 7u, 9u, 63u, 255u, 0x10000u}) {
      INFO("capset " << set);
      uint32_t ours_ver = 0xdead, ours_size = 0xdead, real_ver = 0xbeef, real_size = 0xbeef;
      virgl_renderer_get_cap_set(set, &ours_ver, &ours_size);
      real.get_cap_set(set, &real_ver, &real_size);
      CHECK(ours_ver == real_ver);
      CHECK(ours_size == real_size);
      if (ours_size == 0 || ours_size > 65536) continue;
      std::vector<uint8_t> a(ours_size, 0x5a), b(ours_size, 0x5a);
      virgl_renderer_fill_caps(set, ours_ver, a.data());
      real.fill_caps(set, real_ver, b.data());
      CHECK(a == b);
    }
  };
  SECTION("before virgl_renderer_init") {
    compare_all();
  }
  SECTION("after init with NO_VIRGL | VENUS (lavapipe)") {
    Renderer r(venus_only());
    REQUIRE(r.result() == 0);
    uint32_t ver = 0, size = 0;
    virgl_renderer_get_cap_set(kVenus, &ver, &size);
    CHECK(size > 0);  // venus is really there
    compare_all();
  }
}

TEST_CASE("a venus context is the real library's, fences and all", "[hooks][passthrough]") {
  Renderer r(venus_only());
  REQUIRE(r.result() == 0);
  REQUIRE(virgl_renderer_context_create_with_flags(3, kVenus, 5, "venus") == 0);
  CHECK(virgl_renderer_context_create_with_flags(3, kVenus, 5, "venus") == 0);  // same again
  CHECK(virgl_renderer_context_create_with_flags(3, 8, 5, "rocm") == EINVAL);   // id taken
  uint32_t empty = 0;
  CHECK(virgl_renderer_submit_cmd(&empty, 3, 0) == 0);
  REQUIRE(virgl_renderer_context_create_fence(3, VIRGL_RENDERER_FENCE_FLAG_MERGEABLE, 0, 77) == 0);
  CHECK(r.wait_context_fence(3, 0, 77));
  virgl_renderer_context_destroy(3);
  // The id is free again for anyone, including a venus context.
  CHECK(virgl_renderer_context_create_with_flags(3, kVenus, 5, "venus") == 0);
  virgl_renderer_context_destroy(3);
}

TEST_CASE("guest-memory blobs without the userptr flag stay the real library's",
          "[hooks][passthrough]") {
  Renderer r(venus_only());
  REQUIRE(r.result() == 0);
  RealApi real;
  std::vector<uint8_t> pages(8192);
  iovec iov{pages.data(), pages.size()};
  virgl_renderer_resource_create_blob_args a{};
  a.res_handle = 21;
  a.ctx_id = 0;
  a.blob_mem = VIRGL_RENDERER_BLOB_MEM_GUEST;
  a.size = pages.size();
  a.iovecs = &iov;
  a.num_iovs = 1;
  REQUIRE(virgl_renderer_resource_create_blob(&a) == 0);
  CHECK(virgl_renderer_resource_create_blob(&a) == -EINVAL);  // duplicate id, refused by it

  uint32_t ours = 0, theirs = 0;
  CHECK(virgl_renderer_resource_get_map_info(21, &ours) == 0);
  CHECK(real.get_map_info(21, &theirs) == 0);
  CHECK(ours == theirs);
  CHECK(ours == VIRGL_RENDERER_MAP_CACHE_CACHED);
  int dummy;
  virgl_renderer_resource_set_priv(21, &dummy);
  CHECK(virgl_renderer_resource_get_priv(21) == &dummy);
  uint32_t fd_type = 0;
  int fd = -1;
  CHECK(virgl_renderer_resource_export_blob(21, &fd_type, &fd) == EINVAL);  // no fd behind it

  virgl_renderer_resource_unref(21);
  CHECK(real.get_map_info(21, &theirs) == -EINVAL);
  CHECK(virgl_renderer_resource_get_priv(21) == nullptr);
}

TEST_CASE("bad ids and arguments get the real library's errors, never a crash",
          "[hooks][passthrough]") {
  Renderer r(venus_only());
  REQUIRE(r.result() == 0);
  // Checked before routing, for every capset alike.
  CHECK(virgl_renderer_context_create_with_flags(0, 8, 0, "") == EINVAL);
  CHECK(virgl_renderer_context_create_with_flags(0, kVenus, 0, "") == EINVAL);
  CHECK(virgl_renderer_context_create_with_flags(1, 8 | 0x100, 0, "") == EINVAL);
  CHECK(virgl_renderer_context_create_with_flags(1, kVenus | 0x100, 0, "") == EINVAL);
  CHECK(virgl_renderer_context_create_with_flags(1, 77, 0, "") == EINVAL);  // nobody's capset
  // No such context / resource.
  uint32_t buf[4] = {};
  CHECK(virgl_renderer_submit_cmd(buf, 99, 4) == EINVAL);
  CHECK(virgl_renderer_submit_cmd(buf, -1, -1) == EINVAL);
  CHECK(virgl_renderer_context_create_fence(99, 0, 0, 1) == -EINVAL);
  CHECK(virgl_renderer_context_get_poll_fd(99) == -1);
  virgl_renderer_context_poll(99);
  virgl_renderer_context_destroy(99);
  virgl_renderer_ctx_attach_resource(99, 98);
  virgl_renderer_ctx_detach_resource(99, 98);
  void *map = nullptr;
  uint64_t size = 0;
  CHECK(virgl_renderer_resource_map(98, &map, &size) == -EINVAL);
  CHECK(virgl_renderer_resource_unmap(98) == -EINVAL);
  uint32_t info = 0;
  CHECK(virgl_renderer_resource_get_map_info(98, &info) == -EINVAL);
  virgl_renderer_resource_info ri{};
  CHECK(virgl_renderer_resource_get_info(98, &ri) == EINVAL);
  virgl_renderer_resource_unref(98);
  virgl_renderer_resource_create_blob_args a{};
  a.res_handle = 0;
  a.blob_mem = VIRGL_RENDERER_BLOB_MEM_HOST3D;
  a.size = 4096;
  CHECK(virgl_renderer_resource_create_blob(&a) == -EINVAL);
  a.res_handle = 5;
  a.blob_mem = 77;
  CHECK(virgl_renderer_resource_create_blob(&a) == -EINVAL);
}

TEST_CASE("calls before virgl_renderer_init do not crash", "[hooks][passthrough]") {
  // QEMU asks for capsets before init; the rest is a VMM bug we survive.
  uint32_t ver = 1, size = 1;
  virgl_renderer_get_cap_set(77, &ver, &size);
  CHECK((ver == 0 && size == 0));
  CHECK(virgl_renderer_context_create_with_flags(1, 8, 0, "") == EINVAL);
  CHECK(virgl_renderer_context_create_fence(1, 0, 0, 1) == -EINVAL);
}

TEST_CASE("compute-only starts the real library without EGL", "[hooks][passthrough]") {
  // The stock vtest server's flags, and a version 4 VMM whose get_egl_display has nothing: with
  // either, 0.10.4 tries an EGL winsys, which fails on a host without one.
  Renderer::Options o;
  o.flags = VIRGL_RENDERER_USE_EGL | VIRGL_RENDERER_THREAD_SYNC | VIRGL_RENDERER_USE_EXTERNAL_BLOB |
            VIRGL_RENDERER_VENUS;
  o.egl_display_callback = true;
  ScopedEnv co("RVGL_COMPUTE_ONLY", "1");
  Renderer r(o);
  REQUIRE(r.result() == 0);
  // vrend is off (NO_VIRGL), venus is on as asked.
  CHECK(virgl_renderer_context_create_with_flags(1, 2, 0, "") == EINVAL);
  CHECK(virgl_renderer_context_create_with_flags(2, kVenus, 0, "") == 0);
  virgl_renderer_context_destroy(2);
  // A second init with other flags is refused, as by the real library; so is one naming another
  // callbacks structure (virgl_renderer_init() compares the pointer), whatever it holds.
  CHECK(virgl_renderer_init(&r, o.flags | VIRGL_RENDERER_ASYNC_FENCE_CB, nullptr) == -EBUSY);
  virgl_renderer_callbacks other{};
  other.version = 1;
  CHECK(virgl_renderer_init(&r, o.flags, &other) == -EBUSY);
}

TEST_CASE("the API resolves to our library, with the real one behind it", "[hooks][passthrough]") {
  Dl_info ours{}, next{};
  REQUIRE(dladdr(reinterpret_cast<void *>(&virgl_renderer_init), &ours) != 0);
  CHECK(std::string(ours.dli_fname).find("librocm_virgl") != std::string::npos);
  RealApi real;
  REQUIRE(dladdr(reinterpret_cast<void *>(real.get_cap_set), &next) != 0);
  CHECK(std::string(next.dli_fname).find("libvirglrenderer") != std::string::npos);
}
