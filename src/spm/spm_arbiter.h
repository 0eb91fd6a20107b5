// Host-wide owner of each SPM: one per (physical device, XCP), given to one context at a time.
// The kernel's own exclusivity (ACQUIRE returns -EBUSY) covers other processes; this covers the
// contexts inside one VMM process, which the kernel cannot tell apart when they share a device.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

namespace rvgl {

class SpmArbiter {
 public:
  static SpmArbiter &instance();

  // device: an identity of the physical device (the render node's st_rdev).
  bool try_acquire(uint64_t device, uint32_t xcp, uint32_t ctx_id);
  void release(uint64_t device, uint32_t xcp, uint32_t ctx_id);
  // 0 when free.
  uint32_t owner(uint64_t device, uint32_t xcp) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<uint64_t, uint32_t>, uint32_t> owners_;
};

}  // namespace rvgl
