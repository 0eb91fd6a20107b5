// The "no virtualization" side of the comparisons: the same GPU work driven straight through
// stock libdrm_amdgpu (device handle, BOs, VA, a context, raw CS submission, fence waits), as a
// native ROCm runtime on the host would.
#pragma once

#include <amdgpu.h>
#include <amdgpu_drm.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "util/unique_fd.h"

namespace rvgl::bench {

// One BO, always valid in the device file's VM, CPU-mapped when asked, bound at a GPU VA of its
// own.
class DirectBuffer {
 public:
  DirectBuffer(amdgpu_device_handle dev, uint64_t size, uint32_t heap, bool cpu_map);
  ~DirectBuffer();
  DirectBuffer(const DirectBuffer &) = delete;
  DirectBuffer &operator=(const DirectBuffer &) = delete;

  uint64_t va() const { return va_; }
  uint64_t size() const { return size_; }
  void *cpu() const { return cpu_; }

 private:
  amdgpu_bo_handle bo_ = nullptr;
  amdgpu_va_handle va_handle_ = nullptr;
  uint64_t va_ = 0;
  uint64_t size_ = 0;
  void *cpu_ = nullptr;
};

class DirectGpu {
 public:
  // Opens the first render node (the emulated one) and creates one context. Throws on failure.
  DirectGpu();
  ~DirectGpu();
  DirectGpu(const DirectGpu &) = delete;
  DirectGpu &operator=(const DirectGpu &) = delete;

  amdgpu_device_handle device() const { return dev_; }
  std::unique_ptr<DirectBuffer> buffer(uint64_t size, uint32_t heap, bool cpu_map = false) {
    return std::make_unique<DirectBuffer>(dev_, size, heap, cpu_map);
  }

  // One IB on ring 0 of `ip`; returns the sequence number.
  uint64_t submit(uint32_t ip, uint64_t ib_va, uint32_t dwords);
  // Waits for every listed sequence number of `ip` (one WAIT_FENCES ioctl).
  void wait_all(uint32_t ip, const std::vector<uint64_t> &seqs);
  void wait(uint32_t ip, uint64_t seq) { wait_all(ip, {seq}); }

 private:
  UniqueFd fd_;
  amdgpu_device_handle dev_ = nullptr;
  amdgpu_context_handle ctx_ = nullptr;
  std::vector<amdgpu_cs_fence> fences_;  // reused by wait_all
};

}  // namespace rvgl::bench
