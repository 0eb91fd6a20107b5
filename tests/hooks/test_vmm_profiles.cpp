// VMM profiles (issue 15): each real VMM's callbacks, flags and call sequence, read from its
// sources, replayed in miniature (mini_vmm.h) around an SDMA copy with a fence on the emulated
// GPU. Every profile checks that the fence never retires before the job: the emulator's
// job-completion count at the moment the VMM is told, and the copied bytes right after.
//
// Sources (the call sequences below follow them):
//  - QEMU hw/display/virtio-gpu-virgl.c: virtio_gpu_virgl_init (flags, callbacks version),
//    virtio_gpu_virgl_process_cmd (fences: context_create_fence for VIRTIO_GPU_FLAG_INFO_RING_IDX
//    when the callbacks have write_context_fence, else virgl_renderer_create_fence),
//    virgl_cmd_context_create (context_create_with_flags with context_init, else the legacy
//    virgl_renderer_context_create), virgl_cmd_resource_create_blob / map_blob
//    (resource_create_blob, resource_get_info, resource_map), virtio_gpu_fence_poll (a 10 ms
//    timer calling virgl_renderer_poll while fences are pending). QEMU up to 10.0: callbacks
//    version 1, every fence global, create_fence(fence_id, command type) (issue 15: measured on
//    10.0.2); 10.1 ("virtio-gpu: support context init multiple timeline"): version 3 with
//    write_context_fence; with an EGL display and virglrenderer >= 1.1.2: version 4,
//    VIRGL_RENDERER_ASYNC_FENCE_CB | THREAD_SYNC and thread-safe write callbacks;
//    drm_native_context=on adds VIRGL_RENDERER_DRM (capset 6) and requires the async path.
//  - crosvm rutabaga_gfx: rutabaga_core.rs RutabagaBuilder::new (THREAD_SYNC | ASYNC_FENCE_CB),
//    virgl_renderer.rs (callbacks version 3 with virgl_renderer_next; context_create_with_flags;
//    submit_cmd2; context_create_fence with MERGEABLE; create_blob followed by export_blob,
//    get_map_info and an export query through virgl_renderer_execute; resource_map).
//
// Where a VMM supplies its own GL winsys (QEMU's create_gl_context callbacks) the miniature asks
// vrend for its own surfaceless EGL on Mesa's software rasteriser instead; the fence path is the
// same. Each profile runs in a process of its own (vrend's EGL state is process-wide).
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../../tools/common/amd_packets.h"
#include "mini_vmm.h"
#include "renderer_fixture.h"
#include "rocm_guest.h"

using namespace rvgl::hooks_test;
namespace pk = rvgl::packets;

namespace {

constexpr uint64_t kSize = 64 * 1024;
constexpr int kGlSubstitute = VIRGL_RENDERER_USE_EGL | VIRGL_RENDERER_USE_SURFACELESS;

// The real library's own context_create_with_flags, bypassing ours: is its venus reachable?
int real_context_create_with_flags(uint32_t ctx, uint32_t capset) {
  void *h = dlopen("libvirglrenderer.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!h) return -1;
  auto f = reinterpret_cast<decltype(&virgl_renderer_context_create_with_flags)>(
      dlsym(h, "virgl_renderer_context_create_with_flags"));
  const int r = f ? f(ctx, capset, 4, "real") : -1;
  if (r == 0) {
    auto d = reinterpret_cast<decltype(&virgl_renderer_context_destroy)>(
        dlsym(h, "virgl_renderer_context_destroy"));
    if (d) d(ctx);
  }
  dlclose(h);
  return r;
}

// The blob questions each VMM asks once a blob exists.
void probe_blob(const VmmProfile &p, uint32_t res) {
  if (p.qemu_blob_probe) {
    // virgl_cmd_resource_create_blob: resource_get_info for the dma-buf fd (1.x); the map comes
    // later with MAP_BLOB (RocmGuest::map).
    virgl_renderer_resource_info info{};
    CHECK(virgl_renderer_resource_get_info(static_cast<int>(res), &info) == 0);
    CHECK(info.handle == res);
  }
  if (p.crosvm_blob_probe) {
    uint32_t fd_type = 0;
    int fd = -1;
    CHECK(virgl_renderer_resource_export_blob(res, &fd_type, &fd) == 0);
    if (fd >= 0) close(fd);
    uint32_t map_info = 0;
    CHECK(virgl_renderer_resource_get_map_info(res, &map_info) == 0);
    virgl_renderer_export_query q{};
    q.hdr.stype = VIRGL_RENDERER_STRUCTURE_TYPE_EXPORT_QUERY;
    q.hdr.size = sizeof(q);
    q.in_resource_id = res;
    CHECK(virgl_renderer_execute(&q, sizeof(q)) == 0);
    CHECK(q.out_num_fds == 1);
  }
}

// The whole profile: init, capsets, the guest kernel's legacy context, our context, blobs, an
// SDMA copy per round with a fence, each fence checked against the job record.
void run_profile(VmmProfile p) {
  ScopedEnv capset("RVGL_CAPSET_ID", p.capset_env);
  ScopedEnv sw("LIBGL_ALWAYS_SOFTWARE", "1");  // see the vrend note at the top
  ScopedEnv co("RVGL_COMPUTE_ONLY", nullptr);
  auto vmm = std::make_unique<MiniVmm>(p);
  bool vrend = (p.flags & kGlSubstitute) != 0;
  if (vmm->result() != 0 && vrend) {
    WARN("no surfaceless EGL here: vrend is off for this profile (NO_VIRGL instead)");
    vmm.reset();
    p.flags = (p.flags & ~kGlSubstitute) | VIRGL_RENDERER_NO_VIRGL;
    vmm = std::make_unique<MiniVmm>(p);
    vrend = false;
  }
  REQUIRE(vmm->result() == 0);

  // The capsets the VMM offers (QEMU's virtio_gpu_virgl_get_capsets asks VIRGL2, VENUS, DRM);
  // ours answers under the mapped id.
  uint32_t ver = 0, size = 0;
  virgl_renderer_get_cap_set(p.capset, &ver, &size);
  REQUIRE(ver == RVGL_CAPSET_VERSION);
  REQUIRE(size == sizeof(rvgl_capset));
  if (p.capset == 4) {
    // Issue 15, point 3: venus's flags were dropped, so the real library's venus is not running
    // (with them, Debian's build would start its render server and accept this).
    CHECK(real_context_create_with_flags(90, 4) == EINVAL);  // 0.10.4: no such context type
  }

  // The guest kernel's own context, without a capset (fbcon, a Mesa virgl client): always the
  // real library's (issue 15, point 2).
  if (p.legacy_context) {
    const int r = virgl_renderer_context_create(1, 6, "fbcon");
    CHECK(r == (vrend ? 0 : EINVAL));  // the real library's answer, EINVAL without vrend
    if (vrend) {
      uint32_t empty = 0;
      CHECK(virgl_renderer_submit_cmd(&empty, 1, 0) == 0);
    }
  }

  RocmGuest g(2, 100);
  g.use_submit_cmd2(p.submit_cmd2);
  g.on_blob([&](uint32_t res) { probe_blob(p, res); });
  g.start(p.capset);
  auto [src_bo, src_res] = g.bo_blob(kSize, RVGL_DOMAIN_GTT);
  auto [dst_bo, dst_res] = g.bo_blob(kSize, RVGL_DOMAIN_VRAM, RVGL_BO_FLAG_CPU_ACCESS);
  auto [ib_bo, ib_res] = g.bo_blob(kSize, RVGL_DOMAIN_GTT);
  auto *src = static_cast<uint32_t *>(g.map(src_res, kSize));
  auto *dst = static_cast<uint32_t *>(g.map(dst_res, kSize));
  auto *ib = static_cast<uint32_t *>(g.map(ib_res, kSize));
  const uint64_t va = g.caps().va_start;
  REQUIRE(g.va_map(src_bo, 0, va, kSize, RVGL_VA_FLAG_READ) == 0);
  REQUIRE(g.va_map(dst_bo, 0, va + kSize, kSize) == 0);
  REQUIRE(g.va_map(ib_bo, 0, va + 2 * kSize, kSize, RVGL_VA_FLAG_READ | RVGL_VA_FLAG_EXECUTE) == 0);
  const uint32_t sdma = g.queue_create(RVGL_IP_SDMA, 1);
  std::vector<uint32_t> copy;
  pk::sdma_copy_linear(copy, va + kSize, va, static_cast<uint32_t>(kSize));
  pk::sdma_pad(copy);
  std::memcpy(ib, copy.data(), copy.size() * 4);

  std::mt19937 rng(15);
  const uint64_t jobs0 = MiniVmm::jobs_completed();
  constexpr int kRounds = 16;
  for (int round = 1; round <= kRounds; ++round) {
    INFO(p.name << ", round " << round);
    for (size_t i = 0; i < kSize / 4; ++i)
      src[i] = (uint32_t(round) << 24) | uint32_t(i);
    // Random job lengths: a fence that does not wait for the job shows it at once.
    const std::string lat = std::to_string(200 + rng() % 3000);
    REQUIRE(rvgl_emu_set_knob("RVGL_EMU_JOB_LATENCY_US", lat.c_str()) == 0);
    g.submit(sdma, va + 2 * kSize, copy.size());
    const uint64_t fence_id = 1000 + uint64_t(round);
    REQUIRE(vmm->fence(g.ctx_id(), 1, fence_id) == 0);
    const uint32_t want_ctx = p.ring_fences ? g.ctx_id() : 0;
    const uint32_t want_ring = p.ring_fences ? 1 : 0;
    REQUIRE(vmm->run_until([&] { return vmm->has(want_ctx, want_ring, fence_id); }));
    // The bytes, as the guest would read them the moment its fence signals.
    CHECK(dst[0] == src[0]);
    CHECK(dst[kSize / 4 - 1] == src[kSize / 4 - 1]);
    for (const auto &r : vmm->retired())
      if (r.ctx_id == want_ctx && r.ring_idx == want_ring && r.fence_id == fence_id)
        CHECK(r.jobs_completed - jobs0 == uint64_t(round));  // this round's copy, none after it
  }
  REQUIRE(rvgl_emu_set_knob("RVGL_EMU_JOB_LATENCY_US", "0") == 0);
  // Async VMMs are told from the library's threads, the others on their own.
  for (const auto &t : vmm->threads())
    if (!p.async()) CHECK(t == std::this_thread::get_id());

  for (uint32_t res : {src_res, dst_res, ib_res, g.shmem_res()})
    virgl_renderer_resource_unref(res);
  virgl_renderer_context_destroy(g.ctx_id());
  if (p.legacy_context) virgl_renderer_context_destroy(1);
}

}  // namespace

TEST_CASE("QEMU 9.2 / 10.0: callbacks v1, global fences, ROCM on venus's id",
          "[profile][qemu-10.0]") {
  // virtio_gpu_virgl_init with venus=on: VENUS | RENDER_SERVER; version 1 callbacks (no
  // write_context_fence); gl=on with QEMU's own GL contexts (kGlSubstitute here).
  run_profile({"qemu-10.0", 1, kGlSubstitute | VIRGL_RENDERER_VENUS | VIRGL_RENDERER_RENDER_SERVER,
               false, false, 4, "4", true, false, false, true});
}

TEST_CASE("QEMU 9.2 / 10.0 with -display egl-headless: version 4 without write_context_fence",
          "[profile][qemu-10.0-egl]") {
  // With an EGL display QEMU raises the version to 4 for get_egl_display, but its struct has no
  // write_context_fence before 10.1: the same global-fence path.
  run_profile({"qemu-10.0-egl", 4,
               kGlSubstitute | VIRGL_RENDERER_VENUS | VIRGL_RENDERER_RENDER_SERVER, false, false, 4,
               "4", true, false, false, true});
}

TEST_CASE("QEMU 9.2 / 10.0: mapping ROCM onto capset 1 or 2 is refused at start-up",
          "[profile][qemu-capset-2]") {
  for (const char *id : {"1", "2"}) {
    ScopedEnv capset("RVGL_CAPSET_ID", id);
    MiniVmm vmm(
        {"qemu-10.0", 1, VIRGL_RENDERER_NO_VIRGL, false, false, 2, id, true, false, false, true});
    CHECK(vmm.result() == -EINVAL);
    uint32_t ver = 7, size = 7;
    virgl_renderer_get_cap_set(2, &ver, &size);  // the real library's answer, never ours
    CHECK(size != sizeof(rvgl_capset));
  }
  // The real library was never started: a VMM with a valid mapping starts normally afterwards.
  ScopedEnv capset("RVGL_CAPSET_ID", "4");
  MiniVmm vmm(
      {"qemu-10.0", 1, VIRGL_RENDERER_NO_VIRGL, false, false, 4, "4", false, false, false, true});
  CHECK(vmm.result() == 0);
}

TEST_CASE("QEMU 10.1+ without ASYNC_FENCE_CB (sdl/gtk gl=on): context fences on the poll timer",
          "[profile][qemu-10.1]") {
  run_profile({"qemu-10.1", 3, kGlSubstitute | VIRGL_RENDERER_VENUS | VIRGL_RENDERER_RENDER_SERVER,
               true, true, 4, "4", true, false, false, true});
}

TEST_CASE("QEMU 10.1+ with ASYNC_FENCE_CB (EGL display, virglrenderer >= 1.1.2)",
          "[profile][qemu-10.1-async]") {
  run_profile({"qemu-10.1-async", 4,
               kGlSubstitute | VIRGL_RENDERER_ASYNC_FENCE_CB | VIRGL_RENDERER_THREAD_SYNC |
                   VIRGL_RENDERER_VENUS | VIRGL_RENDERER_RENDER_SERVER,
               true, true, 4, "4", true, false, false, true});
}

TEST_CASE("QEMU 11 drm_native_context=on: ROCM on capset 6", "[profile][qemu-11-drm]") {
  // drm_native_context requires the async path (virtio_gpu_virgl_init refuses DRM without it).
  run_profile({"qemu-11-drm", 4,
               VIRGL_RENDERER_NO_VIRGL | VIRGL_RENDERER_ASYNC_FENCE_CB |
                   VIRGL_RENDERER_THREAD_SYNC | VIRGL_RENDERER_DRM,
               true, true, 6, "6", false, false, false, true});
}

TEST_CASE("crosvm rutabaga: submit_cmd2, MERGEABLE context fences, export_blob",
          "[profile][crosvm]") {
  run_profile({"crosvm", 3,
               VIRGL_RENDERER_NO_VIRGL | VIRGL_RENDERER_THREAD_SYNC |
                   VIRGL_RENDERER_ASYNC_FENCE_CB | VIRGL_RENDERER_USE_EXTERNAL_BLOB |
                   VIRGL_RENDERER_DRM,
               true, true, 6, "6", false, true, true, false});
}
