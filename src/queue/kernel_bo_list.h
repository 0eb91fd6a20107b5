// The context's resident set as a kernel BO list object (AMDGPU_BO_LIST), so a submission names it
// by handle instead of passing (and the kernel re-reading) the whole list every time: one update
// ioctl when the set changes, none per CS. Not VM_ALWAYS_VALID objects: those cannot be exported
// (amdgpu_gem_prime_export refuses them), and every claimed blob is exported to the VMM.
#pragma once

#include <cstdint>
#include <memory>

#include "amdgpu/amdgpu_device.h"
#include "memory/resident_set.h"

namespace rvgl {

class KernelBoList {
 public:
  explicit KernelBoList(std::shared_ptr<AmdgpuDevice> dev) : dev_(std::move(dev)) {}
  ~KernelBoList();
  KernelBoList(const KernelBoList &) = delete;
  KernelBoList &operator=(const KernelBoList &) = delete;

  // Brings the kernel's list in line with `set` if it changed since the last call; *handle is
  // what a CS passes (0 while the set is empty). VMM thread.
  int sync(ResidentSet &set, uint32_t *handle);
  uint64_t updates() const { return updates_; }
  // The kernel's list goes now, and its references with it (teardown; or an update that failed
  // would leave the kernel holding objects the context let go of).
  void destroy();

 private:
  std::shared_ptr<AmdgpuDevice> dev_;
  uint32_t handle_ = 0;
  static constexpr uint64_t kNever = UINT64_MAX;  // no generation of a ResidentSet
  uint64_t synced_generation_ = 0;
  uint64_t updates_ = 0;
};

}  // namespace rvgl
