#include "capset_cache.h"

#include "context/compute_context.h"

namespace rvgl::hooks {

std::optional<rvgl_capset> CapsetCache::get(const Config &cfg) {
  std::lock_guard lk(mu_);
  if (!cached_) {
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
