// Acceptance: a program that uses only stock libdrm / libdrm_amdgpu calls finds the emulated GPU,
// copies 1 MiB from a userptr buffer into VRAM with an SDMA COPY_LINEAR packet, reads it back
// through the CPU mapping, and sees PM4 WRITE_DATA / RELEASE_MEM on the compute ring write what
// they name.
#include <amdgpu.h>
#include <xf86drm.h>

#include <catch2/catch.hpp>

#include "emu_test_support.h"

using namespace rvgl::emu_test;

namespace {

struct MappedBo {
  amdgpu_bo_handle bo = nullptr;
  amdgpu_va_handle va_handle = nullptr;
  uint64_t va = 0;
  uint64_t size = 0;
  void *cpu = nullptr;
};

void map_va(amdgpu_device_handle dev, MappedBo &m) {
  REQUIRE(amdgpu_va_range_alloc(dev, amdgpu_gpu_va_range_general, m.size, 4096, 0, &m.va,
                                &m.va_handle, 0) == 0);
  REQUIRE(amdgpu_bo_va_op(m.bo, 0, m.size, m.va, 0, AMDGPU_VA_OP_MAP) == 0);
}

void unmap_free(MappedBo &m) {
  if (m.cpu) amdgpu_bo_cpu_unmap(m.bo);
  amdgpu_bo_va_op(m.bo, 0, m.size, m.va, 0, AMDGPU_VA_OP_UNMAP);
  amdgpu_va_range_free(m.va_handle);
  amdgpu_bo_free(m.bo);
}

MappedBo alloc(amdgpu_device_handle dev, uint64_t size, uint32_t heap) {
  MappedBo m;
  m.size = size;
  amdgpu_bo_alloc_request req{};
  req.alloc_size = size;
  req.phys_alignment = 4096;
  req.preferred_heap = heap;
  REQUIRE(amdgpu_bo_alloc(dev, &req, &m.bo) == 0);
  REQUIRE(amdgpu_bo_cpu_map(m.bo, &m.cpu) == 0);
  map_va(dev, m);
  return m;
}

uint64_t submit_ib(amdgpu_device_handle dev, amdgpu_context_handle ctx, uint32_t ip,
                   const MappedBo &ib_bo, const std::vector<uint32_t> &ib) {
  std::memcpy(ib_bo.cpu, ib.data(), ib.size() * 4);
  drm_amdgpu_cs_chunk_ib ib_info{};
  ib_info.va_start = ib_bo.va;
  ib_info.ib_bytes = static_cast<uint32_t>(ib.size() * 4);
  ib_info.ip_type = ip;
  drm_amdgpu_cs_chunk chunk{AMDGPU_CHUNK_ID_IB, sizeof(ib_info) / 4,
                            reinterpret_cast<uintptr_t>(&ib_info)};
  uint64_t seq = 0;
  REQUIRE(amdgpu_cs_submit_raw2(dev, ctx, 0, 1, &chunk, &seq) == 0);
  return seq;
}

}  // namespace

TEST_CASE("stock libdrm_amdgpu drives the emulated GPU end to end", "[libdrm][acceptance]") {
  drmDevicePtr devices[8];
  const int n = drmGetDevices2(0, devices, 8);
  REQUIRE(n >= 1);
  std::string render;
  uint16_t pci_device = 0;
  for (int i = 0; i < n; ++i)
    if (devices[i]->bustype == DRM_BUS_PCI && devices[i]->deviceinfo.pci->vendor_id == 0x1002 &&
        (devices[i]->available_nodes & (1 << DRM_NODE_RENDER)) && render.empty()) {
      render = devices[i]->nodes[DRM_NODE_RENDER];
      pci_device = devices[i]->deviceinfo.pci->device_id;
    }
  drmFreeDevices(devices, n);
  REQUIRE(render == "/dev/dri/renderD128");

  Fd fd(open(render.c_str(), O_RDWR | O_CLOEXEC));
  REQUIRE(fd.get() >= 0);
  uint32_t major = 0, minor = 0;
  amdgpu_device_handle dev = nullptr;
  REQUIRE(amdgpu_device_initialize(fd.get(), &major, &minor, &dev) == 0);
  CHECK(major == 3);

  amdgpu_gpu_info gpu{};
  REQUIRE(amdgpu_query_gpu_info(dev, &gpu) == 0);
  CHECK(gpu.asic_id == pci_device);
  CHECK(gpu.cu_active_number > 0);
  drm_amdgpu_info_hw_ip dma{}, compute{};
  REQUIRE(amdgpu_query_hw_ip_info(dev, AMDGPU_HW_IP_DMA, 0, &dma) == 0);
  REQUIRE(amdgpu_query_hw_ip_info(dev, AMDGPU_HW_IP_COMPUTE, 0, &compute) == 0);
  CHECK(dma.available_rings != 0);
  CHECK(compute.available_rings != 0);

  constexpr size_t kSize = 1 << 20;
  MappedBo vram = alloc(dev, kSize, AMDGPU_GEM_DOMAIN_VRAM);
  MappedBo gtt = alloc(dev, 64 * 1024, AMDGPU_GEM_DOMAIN_GTT);
  MappedBo ib = alloc(dev, 4096, AMDGPU_GEM_DOMAIN_GTT);
  std::memset(vram.cpu, 0, kSize);

  void *user = nullptr;
  REQUIRE(posix_memalign(&user, 4096, kSize) == 0);
  auto *src = static_cast<uint32_t *>(user);
  for (size_t i = 0; i < kSize / 4; ++i)
    src[i] = static_cast<uint32_t>(i * 2654435761u);
  MappedBo uptr;
  uptr.size = kSize;
  REQUIRE(amdgpu_create_bo_from_user_mem(dev, user, kSize, &uptr.bo) == 0);
  map_va(dev, uptr);

  amdgpu_context_handle ctx = nullptr;
  REQUIRE(amdgpu_cs_ctx_create2(dev, AMDGPU_CTX_PRIORITY_NORMAL, &ctx) == 0);

  const auto before = counters();
  SECTION("SDMA COPY_LINEAR moves 1 MiB from userptr memory into VRAM") {
    std::vector<uint32_t> pk;
    sdma::copy_linear(pk, vram.va, uptr.va, kSize);
    const uint64_t seq = submit_ib(dev, ctx, AMDGPU_HW_IP_DMA, ib, pk);
    amdgpu_cs_fence fence{ctx, AMDGPU_HW_IP_DMA, 0, 0, seq};
    uint32_t expired = 0;
    REQUIRE(amdgpu_cs_query_fence_status(&fence, AMDGPU_TIMEOUT_INFINITE, 0, &expired) == 0);
    CHECK(expired == 1);
    CHECK(std::memcmp(vram.cpu, user, kSize) == 0);
    CHECK(counters().bytes_copied - before.bytes_copied == kSize);

    // The same pages through a dma-buf: export, import (same object back), map the fd.
    uint32_t dmabuf = 0;
    REQUIRE(amdgpu_bo_export(vram.bo, amdgpu_bo_handle_type_dma_buf_fd, &dmabuf) == 0);
    Fd dmabuf_fd(static_cast<int>(dmabuf));
    CHECK(lseek(dmabuf_fd.get(), 0, SEEK_END) == static_cast<off_t>(kSize));
    amdgpu_bo_import_result imported{};
    REQUIRE(amdgpu_bo_import(dev, amdgpu_bo_handle_type_dma_buf_fd, dmabuf, &imported) == 0);
    CHECK(imported.buf_handle == vram.bo);
    CHECK(imported.alloc_size == kSize);
    amdgpu_bo_free(imported.buf_handle);
    void *p = mmap(nullptr, kSize, PROT_READ, MAP_SHARED, dmabuf_fd.get(), 0);
    REQUIRE(p != MAP_FAILED);
    CHECK(std::memcmp(p, user, kSize) == 0);
    munmap(p, kSize);
  }

  SECTION("PM4 WRITE_DATA and RELEASE_MEM on the compute ring write the values they name") {
    auto *words = static_cast<uint32_t *>(gtt.cpu);
    std::memset(words, 0, 64);
    std::vector<uint32_t> pk;
    pm4::write_data(pk, gtt.va + 0, {0xdeadbeef, 0x12345678});
    pm4::release_mem64(pk, gtt.va + 16, 0x1122334455667788ull);
    pm4::release_mem32(pk, gtt.va + 24, 0xcafef00d);
    const uint64_t seq = submit_ib(dev, ctx, AMDGPU_HW_IP_COMPUTE, ib, pk);
    amdgpu_cs_fence fence{ctx, AMDGPU_HW_IP_COMPUTE, 0, 0, seq};
    uint32_t status = 0, first = ~0u;
    REQUIRE(amdgpu_cs_wait_fences(&fence, 1, true, AMDGPU_TIMEOUT_INFINITE, &status, &first) == 0);
    CHECK(status == 1);
    CHECK(words[0] == 0xdeadbeef);
    CHECK(words[1] == 0x12345678);
    uint64_t v64;
    std::memcpy(&v64, words + 4, 8);
    CHECK(v64 == 0x1122334455667788ull);
    CHECK(words[6] == 0xcafef00d);
  }

  REQUIRE(amdgpu_cs_ctx_free(ctx) == 0);
  unmap_free(uptr);
  unmap_free(ib);
  unmap_free(gtt);
  unmap_free(vram);
  free(user);
  REQUIRE(amdgpu_device_deinitialize(dev) == 0);
}
