// One emulated render node (one XCP): its profile, memory, rings, reset state and SPM.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>

#include "config/config.h"
#include "exec/ring_worker.h"
#include "memory/memory_account.h"
#include "spm/spm_unit.h"

namespace rvgl::emu {

class Device {
 public:
  Device(int index, const Config &cfg);
  ~Device();
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;

  int index() const { return index_; }
  const DeviceProfile &profile() const { return profile_; }
  uint32_t xccs() const { return xccs_; }
  uint32_t drm_minor_version() const { return drm_minor_; }
  const std::shared_ptr<MemoryAccount> &memory() const { return memory_; }
  ResetCounters &resets() { return resets_; }
  SpmUnit &spm() { return spm_; }

  // The IP block behind an AMDGPU_HW_IP_* type, or null for one the device lacks.
  const IpBlock *ip_block(uint32_t ip) const;
  // Kernel rings this node exposes for an IP (HW_IP_INFO available_rings has this many bits).
  uint32_t ring_count(uint32_t ip) const;

  // The worker of one ring, created on first use. Emulator state lock held.
  RingWorker &ring(uint32_t ip, uint32_t ring);
  void stop_rings();
  void forget_after_fork();

 private:
  const int index_;
  const DeviceProfile &profile_;
  const uint32_t xccs_;
  const uint32_t drm_minor_;
  std::shared_ptr<MemoryAccount> memory_;
  ResetCounters resets_;
  SpmUnit spm_;
  std::map<std::pair<uint32_t, uint32_t>, std::unique_ptr<RingWorker>> rings_;
};

}  // namespace rvgl::emu
