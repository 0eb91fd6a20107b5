#include "capset_cache.h"

#include "context/compute_context.h"

namespace rvgl::hooks {

std::optional<rvgl_capset> CapsetCache::get(const Config &cfg) {
  std::lock_guard lk(mu_);
  // A VMM asks once, at start-up (QEMU lists capsets then): a transient kernel failure must not
  // hide the capset for the VM's life, so a failed probe is tried again, a few times.
  for (int attempt = 0; !cached_ && attempt < 3; ++attempt) {
    rvgl_capset c{};
    if (ComputeContext::probe_capset(cfg, &c) == 0) cached_ = c;
  }
  return cached_;
}

void CapsetCache::clear() {
  std::lock_guard lk(mu_);
  cached_.reset();
}

}  // namespace rvgl::hooks
