#include "spm/spm_arbiter.h"

namespace rvgl {

SpmArbiter &SpmArbiter::instance() {
  // Never destroyed: SpmReaper's threads release into it while exit() runs static destructors,
  // and the arbiter may have been created after the reaper (so destroyed before it). Reachable
  // through this pointer, so not a leak.
  static SpmArbiter *a = new SpmArbiter;
  return *a;
}

bool SpmArbiter::try_acquire(uint64_t device, uint32_t xcp, uint32_t ctx_id) {
  std::lock_guard lk(mu_);
  return owners_.emplace(std::make_pair(device, xcp), ctx_id).second;
}

void SpmArbiter::release(uint64_t device, uint32_t xcp, uint32_t ctx_id) {
  std::lock_guard lk(mu_);
  auto it = owners_.find({device, xcp});
  if (it != owners_.end() && it->second == ctx_id) owners_.erase(it);
}

uint32_t SpmArbiter::owner(uint64_t device, uint32_t xcp) const {
  std::lock_guard lk(mu_);
  auto it = owners_.find({device, xcp});
  return it == owners_.end() ? 0 : it->second;
}

}  // namespace rvgl
