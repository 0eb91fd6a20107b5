// The interposer's parts on their own, in an executable with no real libvirglrenderer behind it:
// flag rewriting, reading the VMM's callbacks by version, and every exported function answering
// with an error (not a crash) when the real library is missing.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>

#include "init_flags.h"
#include "log_limit.h"
#include "real_library.h"
#include "renderer_fixture.h"
#include "router.h"
#include "vmm_callbacks.h"

using namespace rvgl::hooks;
using rvgl::hooks_test::Renderer;
using rvgl::hooks_test::ScopedEnv;

TEST_CASE("compute-only drops the GL winsys flags and sets NO_VIRGL", "[hooks]") {
  const int stock_vtest =
      VIRGL_RENDERER_USE_EGL | VIRGL_RENDERER_THREAD_SYNC | VIRGL_RENDERER_USE_EXTERNAL_BLOB;
  CHECK(real_init_flags(stock_vtest, true, 8) ==
        (VIRGL_RENDERER_THREAD_SYNC | VIRGL_RENDERER_USE_EXTERNAL_BLOB | VIRGL_RENDERER_NO_VIRGL));
  const int gl = VIRGL_RENDERER_USE_GLX | VIRGL_RENDERER_USE_SURFACELESS | VIRGL_RENDERER_USE_GLES |
                 VIRGL_RENDERER_VENUS | VIRGL_RENDERER_ASYNC_FENCE_CB;
  CHECK(real_init_flags(gl, true, 8) ==
        (VIRGL_RENDERER_VENUS | VIRGL_RENDERER_ASYNC_FENCE_CB | VIRGL_RENDERER_NO_VIRGL));
  // Without the switch the VMM's flags pass unchanged, its own NO_VIRGL included.
  CHECK(real_init_flags(stock_vtest, false, 8) == stock_vtest);
  CHECK(real_init_flags(VIRGL_RENDERER_NO_VIRGL, false, 8) == VIRGL_RENDERER_NO_VIRGL);
}

TEST_CASE("serving venus's or drm's capset id drops that renderer's init flags", "[hooks]") {
  // QEMU with venus=on (hw/display/virtio-gpu-virgl.c, virtio_gpu_virgl_init) and
  // drm_native_context=on, with an EGL display and virglrenderer >= 1.1.2.
  const int venus = VIRGL_RENDERER_VENUS | VIRGL_RENDERER_RENDER_SERVER;
  const int qemu =
      venus | VIRGL_RENDERER_DRM | VIRGL_RENDERER_ASYNC_FENCE_CB | VIRGL_RENDERER_THREAD_SYNC;
  CHECK(real_init_flags(qemu, false, 4) == (qemu & ~venus));
  CHECK(real_init_flags(qemu, false, 6) == (qemu & ~VIRGL_RENDERER_DRM));
  CHECK(real_init_flags(qemu, false, 8) == qemu);
  CHECK(real_init_flags(qemu, true, 4) == ((qemu & ~venus) | VIRGL_RENDERER_NO_VIRGL));
}

namespace {
void fake_write_context_fence(void *, uint32_t, uint32_t, uint64_t) {}
void fake_write_fence(void *, uint32_t) {}
void our_write_fence(void *, uint32_t) {}
int fake_get_drm_fd(void *) {
  return 42;
}
}  // namespace

TEST_CASE("the VMM's callbacks are read only as far as their version goes", "[hooks]") {
  virgl_renderer_callbacks cbs;
  std::memset(&cbs, 0, sizeof(cbs));
  cbs.get_drm_fd = fake_get_drm_fd;
  cbs.write_context_fence = fake_write_context_fence;
  int cookie = 0;

  cbs.version = 1;  // ends before get_drm_fd: what lies after is not the VMM's
  VmmCallbacks v1(&cookie, VIRGL_RENDERER_ASYNC_FENCE_CB, &cbs);
  CHECK(v1.get_drm_fd() == -1);
  CHECK(v1.write_context_fence() == nullptr);
  CHECK(v1.async_fences());

  cbs.version = 2;
  VmmCallbacks v2(&cookie, 0, &cbs);
  CHECK(v2.get_drm_fd() == 42);
  CHECK(v2.write_context_fence() == nullptr);
  CHECK_FALSE(v2.async_fences());

  cbs.version = 3;
  VmmCallbacks v3(&cookie, 0, &cbs);
  CHECK(v3.write_context_fence() == &fake_write_context_fence);
  CHECK(v3.cookie() == &cookie);

  cbs.version = 4;
  cbs.get_egl_display = [](void *) -> void * { return nullptr; };
  VmmCallbacks v4(&cookie, 0, &cbs);
  cbs.write_fence = fake_write_fence;
  VmmCallbacks v4w(&cookie, 0, &cbs);
  CHECK(v4w.write_fence() == &fake_write_fence);
  const virgl_renderer_callbacks *copy = v4w.for_real_library(&our_write_fence, true);
  REQUIRE(copy != nullptr);
  CHECK(copy->get_egl_display == nullptr);
  CHECK(copy->write_fence == &our_write_fence);  // global fences come to us first
  CHECK(copy->write_context_fence == &fake_write_context_fence);
  CHECK(copy->version == 4);
  CHECK(v4w.for_real_library(&our_write_fence, true) == copy);  // the same pointer each time
  // Not compute-only: the VMM's EGL display stays.
  CHECK(v4.for_real_library(&our_write_fence, false)->get_egl_display == cbs.get_egl_display);
  // A VMM without write_fence keeps none.
  CHECK(v4.for_real_library(&our_write_fence, false)->write_fence == nullptr);

  cbs.version = 7;  // a future VMM: nothing of it is interpreted
  VmmCallbacks v7(&cookie, 0, &cbs);
  CHECK(v7.write_context_fence() == nullptr);
  CHECK(v7.for_real_library(&our_write_fence, true) == nullptr);

  VmmCallbacks none(&cookie, 0, nullptr);
  CHECK(none.get_drm_fd() == -1);
}

TEST_CASE("a symbol the real library lacks resolves to null", "[hooks]") {
  CHECK(resolve_real("virgl_renderer_no_such_function") == nullptr);
  RealSymbol<int (*)()> missing("virgl_renderer_no_such_function");
  CHECK(missing.get() == nullptr);
  CHECK(missing.get() == nullptr);  // retried, still null, no crash
  // This executable loads no libvirglrenderer at all.
  CHECK(resolve_real("virgl_renderer_init") == nullptr);
  CHECK_FALSE(real_has_v1_abi());
}

TEST_CASE("without a real library every call answers an error and nothing crashes", "[hooks]") {
  ScopedEnv node("RVGL_RENDER_NODE", "/nonexistent/renderD128");  // no GPU either
  ScopedEnv co("RVGL_COMPUTE_ONLY", "1");
  {
    Renderer r({});
    CHECK(r.result() == 0);  // we serve ROCM contexts alone
    uint32_t max_ver = 9, max_size = 9;
    virgl_renderer_get_cap_set(1, &max_ver, &max_size);
    CHECK((max_ver == 0 && max_size == 0));
    virgl_renderer_get_cap_set(8, &max_ver, &max_size);  // ours, but no device answers
    CHECK((max_ver == 0 && max_size == 0));
    CHECK(virgl_renderer_context_create_with_flags(1, 2, 0, "") == EINVAL);
    CHECK(virgl_renderer_context_create(1, 0, "") == EINVAL);
    CHECK(virgl_renderer_context_create_with_flags(1, 8, 0, "") == ENOENT);  // the open's errno
    CHECK(virgl_renderer_submit_cmd(nullptr, 1, 0) == EINVAL);
    CHECK(virgl_renderer_submit_cmd2(nullptr, 1, 0, nullptr, 0) == ENOSYS);
    CHECK(virgl_renderer_context_create_fence(1, 0, 0, 1) == -EINVAL);
    CHECK(virgl_renderer_context_get_poll_fd(1) == -1);
    virgl_renderer_context_poll(1);
    virgl_renderer_poll();
    CHECK(virgl_renderer_get_poll_fd() == -1);

    virgl_renderer_resource_create_blob_args blob{};
    blob.res_handle = 1;
    blob.blob_mem = VIRGL_RENDERER_BLOB_MEM_HOST3D;
    blob.size = 4096;
    CHECK(virgl_renderer_resource_create_blob(&blob) == -ENOSYS);
    CHECK(virgl_renderer_resource_create_blob(nullptr) == -EINVAL);
    virgl_renderer_resource_create_args args{};
    args.handle = 1;
    CHECK(virgl_renderer_resource_create(&args, nullptr, 0) == EINVAL);
    CHECK(virgl_renderer_resource_create(nullptr, nullptr, 0) == EINVAL);
    void *map = nullptr;
    uint64_t size = 0;
    CHECK(virgl_renderer_resource_map(1, &map, &size) == -ENOSYS);
    CHECK(virgl_renderer_resource_unmap(1) == -ENOSYS);
    CHECK(virgl_renderer_resource_map_fixed(1, nullptr) == -ENOSYS);
    uint32_t info = 0, fd_type = 0;
    int fd = -1;
    CHECK(virgl_renderer_resource_get_map_info(1, &info) == -ENOSYS);
    CHECK(virgl_renderer_resource_export_blob(1, &fd_type, &fd) == ENOSYS);
    virgl_renderer_resource_info ri{};
    CHECK(virgl_renderer_resource_get_info(1, &ri) == EINVAL);
    rvgl_virgl_resource_info_ext_v1 rix{};
    CHECK(virgl_renderer_resource_get_info_ext(1, &rix) == ENOSYS);
    CHECK(virgl_renderer_resource_get_priv(1) == nullptr);
    virgl_renderer_resource_set_priv(1, &info);
    virgl_renderer_ctx_attach_resource(1, 1);
    virgl_renderer_ctx_detach_resource(1, 1);
    virgl_renderer_resource_unref(1);
    CHECK(virgl_renderer_export_fence(1, &fd) == -ENOSYS);
    // Without a real library a global fence is ours alone: accepted, and with no ROCM work
    // pending written at the VMM's next poll (never inside create_fence: QEMU has not queued
    // the command yet).
    CHECK(virgl_renderer_create_fence(1, 0) == 0);
    CHECK(r.ctx0_fences().empty());
    virgl_renderer_poll();
    CHECK(r.ctx0_fences() == std::vector<uint32_t>{1});
    CHECK(virgl_renderer_get_cursor_data(1, nullptr, nullptr) == nullptr);
    CHECK(virgl_set_debug_callback(nullptr) == nullptr);
    // Without a real library we keep the VMM's log callback and own its user_data, releasing it
    // when the callback is replaced, as the real library does.
    static bool freed = false;
    virgl_set_log_callback(nullptr, &freed, [](void *p) { *static_cast<bool *>(p) = true; });
    CHECK_FALSE(freed);
    virgl_set_log_callback(nullptr, nullptr, nullptr);
    CHECK(freed);
    virgl_renderer_context_destroy(1);
    virgl_renderer_reset();
  }
  // A callbacks struct the real library would refuse is refused here too.
  CHECK(virgl_renderer_init(nullptr, 0, nullptr) == -1);
}

TEST_CASE("a log limit lets ten through per five seconds and counts the rest", "[hooks]") {
  LogLimit limit;
  constexpr int64_t s = 1'000'000'000;
  uint32_t left_out = 99;
  uint32_t passed = 0;
  for (int i = 0; i < 25; ++i) {
    passed += limit.allow(100 * s, &left_out);
    CHECK(left_out == 0);
  }
  CHECK(passed == 10);
  // Still the same interval just before its end.
  CHECK_FALSE(limit.allow(105 * s - 1, &left_out));
  CHECK(left_out == 0);
  // The next one opens a new interval and hears of the 16 refused.
  CHECK(limit.allow(105 * s, &left_out));
  CHECK(left_out == 16);
  passed = 0;
  for (int i = 0; i < 12; ++i)
    passed += limit.allow(106 * s, &left_out);
  CHECK(passed == 9);
  CHECK(left_out == 0);
  // A quiet interval: nothing was refused in it.
  CHECK(limit.allow(200 * s, &left_out));
  CHECK(left_out == 3);
  CHECK(limit.allow(300 * s, &left_out));
  CHECK(left_out == 0);
}
