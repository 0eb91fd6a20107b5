#include "direct_gpu.h"

#include <fcntl.h>

#include <stdexcept>
#include <string>

namespace rvgl::bench {

namespace {

void check(int r, const char *what) {
  if (r) throw std::runtime_error(std::string(what) + ": " + std::to_string(r));
}

}  // namespace

DirectBuffer::DirectBuffer(amdgpu_device_handle dev, uint64_t size, uint32_t heap, bool cpu_map)
    : size_(size) {
  amdgpu_bo_alloc_request req{};
  req.alloc_size = size;
  req.phys_alignment = 4096;
  req.preferred_heap = heap;
  // Always valid in this file's VM, as RADV makes the objects it never shares: the kernel then
  // keeps them resident with the VM, so a CS needs no BO list and is still correct (a BO that is
  // neither listed nor always valid may be evicted under a running job).
  req.flags = AMDGPU_GEM_CREATE_VM_ALWAYS_VALID;
  if (cpu_map && heap == AMDGPU_GEM_DOMAIN_VRAM) req.flags |= AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED;
  check(amdgpu_bo_alloc(dev, &req, &bo_), "amdgpu_bo_alloc");
  check(
      amdgpu_va_range_alloc(dev, amdgpu_gpu_va_range_general, size, 4096, 0, &va_, &va_handle_, 0),
      "amdgpu_va_range_alloc");
  check(amdgpu_bo_va_op(bo_, 0, size, va_, 0, AMDGPU_VA_OP_MAP), "amdgpu_bo_va_op");
  if (cpu_map) check(amdgpu_bo_cpu_map(bo_, &cpu_), "amdgpu_bo_cpu_map");
}

DirectBuffer::~DirectBuffer() {
  if (cpu_) amdgpu_bo_cpu_unmap(bo_);
  amdgpu_bo_va_op(bo_, 0, size_, va_, 0, AMDGPU_VA_OP_UNMAP);
  amdgpu_va_range_free(va_handle_);
  amdgpu_bo_free(bo_);
}

DirectGpu::DirectGpu() : fd_(::open("/dev/dri/renderD128", O_RDWR | O_CLOEXEC)) {
  if (!fd_) throw std::runtime_error("no render node");
  uint32_t major = 0, minor = 0;
  check(amdgpu_device_initialize(fd_.get(), &major, &minor, &dev_), "amdgpu_device_initialize");
  check(amdgpu_cs_ctx_create2(dev_, AMDGPU_CTX_PRIORITY_NORMAL, &ctx_), "amdgpu_cs_ctx_create2");
}

DirectGpu::~DirectGpu() {
  amdgpu_cs_ctx_free(ctx_);
  amdgpu_device_deinitialize(dev_);
}

uint64_t DirectGpu::submit(uint32_t ip, uint64_t ib_va, uint32_t dwords) {
  drm_amdgpu_cs_chunk_ib ib{};
  ib.va_start = ib_va;
  ib.ib_bytes = dwords * 4;
  ib.ip_type = ip;
  drm_amdgpu_cs_chunk chunk{AMDGPU_CHUNK_ID_IB, sizeof(ib) / 4, reinterpret_cast<uintptr_t>(&ib)};
  uint64_t seq = 0;
  check(amdgpu_cs_submit_raw2(dev_, ctx_, 0, 1, &chunk, &seq), "amdgpu_cs_submit_raw2");
  return seq;
}

void DirectGpu::wait_all(uint32_t ip, const std::vector<uint64_t> &seqs) {
  fences_.clear();
  for (uint64_t s : seqs)
    fences_.push_back(amdgpu_cs_fence{ctx_, ip, 0, 0, s});
  uint32_t status = 0, first = 0;
  check(amdgpu_cs_wait_fences(fences_.data(), static_cast<uint32_t>(fences_.size()), true,
                              AMDGPU_TIMEOUT_INFINITE, &status, &first),
        "amdgpu_cs_wait_fences");
  if (status != 1) throw std::runtime_error("fences did not signal");
}

}  // namespace rvgl::bench
