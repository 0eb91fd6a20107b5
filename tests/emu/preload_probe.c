/* A program that knows nothing of the emulator: it uses stock libdrm/libdrm_amdgpu only. Run with
 * librvgl_emu.so preloaded (meson test emu-preload) it must find two emulated devices, fill VRAM
 * on the second with an SDMA packet, and see the emulator's counters through dlsym. */
#include <amdgpu.h>
#include <amdgpu_drm.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <xf86drm.h>

#include "rvgl_emu.h"

#define CHECK(cond)                                                             \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "preload_probe: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      return 1;                                                                 \
    }                                                                           \
  } while (0)

int main(void) {
  drmDevicePtr devices[8];
  const int n = drmGetDevices2(0, devices, 8);
  CHECK(n == 2);
  drmFreeDevices(devices, n);

  const int fd = open("/dev/dri/renderD129", O_RDWR | O_CLOEXEC);
  CHECK(fd >= 0);
  uint32_t major, minor;
  amdgpu_device_handle dev;
  CHECK(amdgpu_device_initialize(fd, &major, &minor, &dev) == 0);

  amdgpu_bo_handle bo;
  struct amdgpu_bo_alloc_request req = {
      .alloc_size = 65536, .phys_alignment = 4096, .preferred_heap = AMDGPU_GEM_DOMAIN_VRAM};
  CHECK(amdgpu_bo_alloc(dev, &req, &bo) == 0);
  void *cpu;
  CHECK(amdgpu_bo_cpu_map(bo, &cpu) == 0);
  memset(cpu, 0, 65536);
  uint64_t va;
  amdgpu_va_handle va_handle;
  CHECK(amdgpu_va_range_alloc(dev, amdgpu_gpu_va_range_general, 65536, 4096, 0, &va, &va_handle,
                              0) == 0);
  CHECK(amdgpu_bo_va_op(bo, 0, 65536, va, 0, AMDGPU_VA_OP_MAP) == 0);

  /* SDMA CONST_FILL of the second half, IB in the first page (sdma_v6_0_0_pkt_open.h layout). */
  uint32_t *ib = cpu;
  ib[0] = 11u | (2u << 30);
  ib[1] = (uint32_t)(va + 32768);
  ib[2] = (uint32_t)((va + 32768) >> 32);
  ib[3] = 0x5a5a5a5au;
  ib[4] = 32768 - 1;
  amdgpu_context_handle ctx;
  CHECK(amdgpu_cs_ctx_create2(dev, AMDGPU_CTX_PRIORITY_NORMAL, &ctx) == 0);
  struct drm_amdgpu_cs_chunk_ib ib_info = {
      .va_start = va, .ib_bytes = 20, .ip_type = AMDGPU_HW_IP_DMA};
  struct drm_amdgpu_cs_chunk chunk = {AMDGPU_CHUNK_ID_IB, sizeof(ib_info) / 4, (uintptr_t)&ib_info};
  uint64_t seq;
  CHECK(amdgpu_cs_submit_raw2(dev, ctx, 0, 1, &chunk, &seq) == 0);
  struct amdgpu_cs_fence fence = {ctx, AMDGPU_HW_IP_DMA, 0, 0, seq};
  uint32_t expired = 0;
  CHECK(amdgpu_cs_query_fence_status(&fence, AMDGPU_TIMEOUT_INFINITE, 0, &expired) == 0);
  CHECK(expired == 1);
  CHECK(((uint8_t *)cpu)[65535] == 0x5a);

  int (*get_counters)(struct rvgl_emu_counters *, size_t) =
      (int (*)(struct rvgl_emu_counters *, size_t))dlsym(RTLD_DEFAULT, "rvgl_emu_get_counters");
  CHECK(get_counters != NULL);
  struct rvgl_emu_counters c;
  CHECK(get_counters(&c, sizeof(c)) == 0);
  CHECK(c.bytes_written == 32768); /* this process's only job: the fill */
  CHECK(c.jobs_completed == 1);

  amdgpu_cs_ctx_free(ctx);
  amdgpu_bo_va_op(bo, 0, 65536, va, 0, AMDGPU_VA_OP_UNMAP);
  amdgpu_va_range_free(va_handle);
  amdgpu_bo_cpu_unmap(bo);
  amdgpu_bo_free(bo);
  amdgpu_device_deinitialize(dev);
  close(fd);
  puts("preload_probe: ok");
  return 0;
}
