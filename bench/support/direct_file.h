// A native process's own view of the GPU, for the scale comparison: one DRM file of its own (as
// each guest context has one, and as 64 native processes would have 64), with kernel contexts,
// compute IBs and fence waits issued as raw ioctls. Not libdrm_amdgpu's device handle: that one
// is shared by every open of the same GPU in a process (amdgpu_device_initialize() looks the
// device up by name), which would put 64 "processes" in one file and one VM.
#pragma once

#include <cstdint>
#include <vector>

#include "util/unique_fd.h"

namespace rvgl::bench {

class DirectFile {
 public:
  // Opens the first render node (the emulated one), creates `contexts` kernel contexts and one
  // CPU-mapped GTT buffer for IBs and their targets. Throws on failure.
  explicit DirectFile(uint32_t contexts);
  ~DirectFile();
  DirectFile(const DirectFile &) = delete;
  DirectFile &operator=(const DirectFile &) = delete;

  // The buffer's GPU VA and CPU mapping (64 KiB).
  uint64_t va() const { return va_; }
  void *cpu() const { return cpu_; }
  static constexpr uint64_t kBufferSize = 64 * 1024;

  // One compute IB on `ring` through kernel context `ctx` (an index): one CS ioctl.
  void submit(uint32_t ctx, uint32_t ring, uint64_t ib_va, uint32_t dwords);
  // Waits for the newest submission of every (context, ring) used since the last wait: one
  // WAIT_FENCES ioctl.
  void wait_all();

 private:
  UniqueFd fd_;
  std::vector<uint32_t> ctx_ids_;
  uint64_t va_ = 0;
  void *cpu_ = nullptr;
  struct Last {
    uint32_t ctx_id;
    uint32_t ring;
    uint64_t seq;
  };
  std::vector<Last> last_;  // newest sequence number per (context, ring) since the last wait
};

}  // namespace rvgl::bench
