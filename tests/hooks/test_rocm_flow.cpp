// A ROCM context's whole life through the public virglrenderer API, in front of the real
// libvirglrenderer 0.10.4, on the emulated GPU: the acceptance flow of issue 5.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <numeric>
#include <thread>

#include "../../tools/common/amd_packets.h"
#include "guest_pages.h"
#include "renderer_fixture.h"
#include "rocm_guest.h"
#include "rvgl_emu.h"

using namespace rvgl::hooks_test;
namespace pk = rvgl::packets;

namespace {

constexpr uint64_t kKiB = 1024;

Renderer::Options rocm_options(bool async) {
  Renderer::Options o;
  o.flags = VIRGL_RENDERER_NO_VIRGL | VIRGL_RENDERER_THREAD_SYNC;
  if (async) o.flags |= VIRGL_RENDERER_ASYNC_FENCE_CB;
  return o;
}

}  // namespace

TEST_CASE("capset ROCM is ours and describes the device", "[hooks][rocm]") {
  Renderer r(rocm_options(false));
  REQUIRE(r.result() == 0);
  uint32_t ver = 0, size = 0;
  virgl_renderer_get_cap_set(RVGL_CAPSET_ID, &ver, &size);
  REQUIRE(ver == RVGL_CAPSET_VERSION);
  REQUIRE(size == sizeof(rvgl_capset));
  rvgl_capset c{};
  virgl_renderer_fill_caps(RVGL_CAPSET_ID, 1, &c);
  CHECK(c.wire_format_version == RVGL_WIRE_FORMAT_VERSION);
  CHECK(c.protocol_major == RVGL_PROTOCOL_MAJOR);
  CHECK(c.pci_vendor_id == 0x1002);
  CHECK(c.shmem_size == RVGL_SHMEM_SIZE);
  CHECK(c.va_start < c.va_end);
  CHECK((c.features & RVGL_FEATURE_USERPTR));
  CHECK((c.features & RVGL_FEATURE_RESOURCE_IMPORT));
  // A version above the capset's is not filled (vtest asks get_cap_set first and refuses).
  rvgl_capset untouched{};
  virgl_renderer_fill_caps(RVGL_CAPSET_ID, 2, &untouched);
  CHECK(untouched.wire_format_version == 0);
}

TEST_CASE("a transient kernel failure while the capset is probed does not hide it",
          "[hooks][rocm]") {
  // QEMU lists capsets once, at start-up: a failed probe then would hide ROCM for the VM's life.
  rvgl_emu_counters before{}, after{};
  rvgl_emu_get_counters(&before, sizeof before);
  rvgl_emu_reset_fault_injection();
  REQUIRE(rvgl_emu_set_knob("RVGL_EMU_FAIL", "INFO:1:EIO") == 0);
  Renderer r(rocm_options(false));
  REQUIRE(r.result() == 0);
  uint32_t ver = 0, size = 0;
  virgl_renderer_get_cap_set(RVGL_CAPSET_ID, &ver, &size);
  rvgl_emu_get_counters(&after, sizeof after);
  rvgl_emu_reset_fault_injection();
  CHECK(after.injected_failures - before.injected_failures == 1);
  CHECK(ver == RVGL_CAPSET_VERSION);
  CHECK(size == sizeof(rvgl_capset));
}

TEST_CASE("the capset id is configurable", "[hooks][rocm]") {
  uint32_t ver = 0, size = 0;
  {
    ScopedEnv id("RVGL_CAPSET_ID", "9");
    Renderer r(rocm_options(false));
    REQUIRE(r.result() == 0);
    virgl_renderer_get_cap_set(9, &ver, &size);
    CHECK((ver == 1 && size == sizeof(rvgl_capset)));
    virgl_renderer_get_cap_set(8, &ver, &size);  // 8 is now nobody's: the real library's answer
    CHECK((ver == 0 && size == 0));
    RocmGuest g(1, 1);
    REQUIRE_NOTHROW(g.start(9));
    CHECK(virgl_renderer_context_create_with_flags(2, 8, 0, "") == EINVAL);
    virgl_renderer_context_destroy(1);
  }
  // The renderer and its environment are gone: 9 is nobody's again, before any new init (the
  // configuration is read anew, not kept from the last renderer).
  ver = 0xdead;
  size = 0xdead;
  virgl_renderer_get_cap_set(9, &ver, &size);
  CHECK((ver == 0 && size == 0));
}

TEST_CASE("a ROCM context's full flow through the public API", "[hooks][rocm]") {
  const bool async = GENERATE(false, true);
  INFO((async ? "ASYNC_FENCE_CB: fences from the retire thread" : "fences through poll fds"));
  Renderer r(rocm_options(async));
  REQUIRE(r.result() == 0);
  RocmGuest g(1, 100);
  REQUIRE_NOTHROW(g.start());
  CHECK(virgl_renderer_context_create_with_flags(1, RVGL_CAPSET_ID, 0, "") == 0);  // again: fine
  const uint64_t va0 = g.caps().va_start;

  // The shared page: an SHM fd (what vtest accepts), cached.
  uint32_t map_info = 0, fd_type = 0;
  int fd = -1;
  CHECK(virgl_renderer_resource_get_map_info(g.shmem_res(), &map_info) == 0);
  CHECK(map_info == VIRGL_RENDERER_MAP_CACHE_CACHED);
  REQUIRE(virgl_renderer_resource_export_blob(g.shmem_res(), &fd_type, &fd) == 0);
  CHECK(fd_type == VIRGL_RENDERER_BLOB_FD_TYPE_SHM);
  close(fd);
  CHECK(g.shmem_header().layout_version == RVGL_WIRE_FORMAT_VERSION);

  // VRAM destination and a GTT IB buffer, both HOST3D blobs the VMM maps.
  constexpr uint64_t kSize = 256 * kKiB;
  auto [dst_bo, dst_res] = g.bo_blob(kSize, RVGL_DOMAIN_VRAM, RVGL_BO_FLAG_CPU_ACCESS);
  auto [ib_bo, ib_res] = g.bo_blob(64 * kKiB, RVGL_DOMAIN_GTT);
  auto *dst = static_cast<uint8_t *>(g.map(dst_res, kSize));
  auto *ib = static_cast<uint32_t *>(g.map(ib_res, 64 * kKiB));
  void *again = nullptr;
  uint64_t again_size = 0;
  CHECK(virgl_renderer_resource_map(dst_res, &again, &again_size) == -EINVAL);  // one map each
  CHECK(virgl_renderer_resource_get_map_info(dst_res, &map_info) == 0);
  CHECK(map_info == VIRGL_RENDERER_MAP_CACHE_WC);

  // Userptr source: guest pages handed over as iovecs, GPU-visible without a copy.
  GuestPages src(kSize);
  auto *s32 = reinterpret_cast<uint32_t *>(src.ptr);
  std::iota(s32, s32 + kSize / 4, 0x51510000u);
  const uint32_t src_res = g.next_res_id();
  const iovec iov{src.ptr, kSize};
  REQUIRE(g.create_blob(src_res, VIRGL_RENDERER_BLOB_MEM_GUEST, RVGL_BLOB_FLAG_USERPTR, 0, kSize,
                        &iov, 1) == 0);
  CHECK(virgl_renderer_resource_get_map_info(src_res, &map_info) == 0);
  CHECK(virgl_renderer_resource_map(src_res, &again, &again_size) == -EINVAL);  // VMM has them
  CHECK(virgl_renderer_resource_export_blob(src_res, &fd_type, &fd) == EINVAL);

  const uint64_t src_va = va0, dst_va = va0 + kSize, ib_va = va0 + 2 * kSize;
  REQUIRE(g.va_map(0, src_res, src_va, kSize, RVGL_VA_FLAG_READ) == 0);
  REQUIRE(g.va_map(dst_bo, 0, dst_va, kSize) == 0);
  REQUIRE(g.va_map(ib_bo, 0, ib_va, 64 * kKiB, RVGL_VA_FLAG_READ | RVGL_VA_FLAG_EXECUTE) == 0);
  const uint32_t sdma = g.queue_create(RVGL_IP_SDMA, 1);
  const uint32_t compute = g.queue_create(RVGL_IP_COMPUTE, 2);

  // SDMA: userptr -> VRAM. Then PM4 WRITE_DATA of a marker into the VRAM tail, after the copy.
  std::vector<uint32_t> copy;
  pk::sdma_copy_linear(copy, dst_va, src_va, static_cast<uint32_t>(kSize - 16));
  pk::sdma_pad(copy);
  std::memcpy(ib, copy.data(), copy.size() * 4);
  const uint64_t seq = g.submit(sdma, ib_va, copy.size());
  REQUIRE(g.fence(1, 11) == 0);
  std::vector<uint32_t> write;
  pk::pm4_write_data(write, dst_va + kSize - 16,
                     {0xfeed0001u, 0xfeed0002u, 0xfeed0003u, 0xfeed0004u});
  std::memcpy(ib + 1024, write.data(), write.size() * 4);
  g.submit(compute, ib_va + 4096, write.size(), {{sdma, 0, seq}});
  REQUIRE(g.fence(2, 21) == 0);
  REQUIRE(g.fence(0, 1) == 0);

  REQUIRE(r.wait_context_fence(1, 1, 11));
  REQUIRE(r.wait_context_fence(1, 2, 21));
  REQUIRE(r.wait_context_fence(1, 0, 1));
  CHECK(std::memcmp(dst, src.ptr, kSize - 16) == 0);
  const auto *tail = reinterpret_cast<const uint32_t *>(dst + kSize - 16);
  CHECK(tail[0] == 0xfeed0001u);
  CHECK(tail[3] == 0xfeed0004u);
  // Delivery thread: the VMM's own (poll). With ASYNC_FENCE_CB the completion engine's, or the
  // VMM's inside create_fence for a fence with nothing left to wait for (the CPU ring's; a GPU
  // ring's whose job the user fence shows done) — unless the engine is delivering just then, which
  // takes it over (one deliverer at a time, docs/threads.md). Never any other thread.
  for (const auto &f : r.fences().snapshot()) {
    INFO("ring " << f.ring_idx << " delivered on " << f.thread_name);
    if (!async)
      CHECK(f.thread == std::this_thread::get_id());
    else
      CHECK((f.thread == std::this_thread::get_id() || f.thread_name == "rvgl-completion"));
  }
  if (!async) CHECK(virgl_renderer_context_get_poll_fd(1) >= 0);

  // The VRAM blob exports as a dma-buf with the same bytes; get_info(_ext) describe it.
  REQUIRE(virgl_renderer_resource_export_blob(dst_res, &fd_type, &fd) == 0);
  CHECK(fd_type == VIRGL_RENDERER_BLOB_FD_TYPE_DMABUF);
  void *view = mmap(nullptr, kSize, PROT_READ, MAP_SHARED, fd, 0);
  REQUIRE(view != MAP_FAILED);
  CHECK(std::memcmp(view, dst, kSize) == 0);
  munmap(view, kSize);
  close(fd);
  virgl_renderer_resource_info info{};
  CHECK(virgl_renderer_resource_get_info(static_cast<int>(dst_res), &info) == 0);
  CHECK(info.handle == dst_res);
  rvgl_virgl_resource_info_ext_v1 ext{};
  CHECK(virgl_renderer_resource_get_info_ext(static_cast<int>(dst_res), &ext) == 0);
  CHECK(ext.base.handle == dst_res);
  CHECK(ext.base.fd >= 0);
  CHECK(ext.has_dmabuf_export);

  // unref detaches from the context: the GPU may no longer name the resource.
  CHECK(virgl_renderer_resource_unmap(dst_res) == 0);
  CHECK(virgl_renderer_resource_unmap(dst_res) == -EINVAL);
  virgl_renderer_resource_unref(src_res);
  CHECK(g.va_map(0, src_res, va0 + 8 * kSize, kSize, RVGL_VA_FLAG_READ) == -ENOENT);
  CHECK(virgl_renderer_resource_get_map_info(src_res, &map_info) == -EINVAL);
  for (uint32_t res : {dst_res, ib_res, g.shmem_res()})
    virgl_renderer_resource_unref(res);

  virgl_renderer_context_destroy(1);
  uint32_t nop[4] = {};
  CHECK(virgl_renderer_submit_cmd(nop, 1, 4) == EINVAL);  // gone: the real library's answer
  CHECK(virgl_renderer_context_create_fence(1, 0, 0, 2) == -EINVAL);
}
