#include "memory/usage.h"

#include <cerrno>

namespace rvgl {

int Usage::charge(Pool pool, uint64_t bytes) {
  const auto i = static_cast<size_t>(pool);
  // Single writer (the VMM thread); atomics only so readers on other threads see sane values.
  const uint64_t b = bytes_[i].load(std::memory_order_relaxed);
  if (objects_.load(std::memory_order_relaxed) >= max_objects_) return -ENOSPC;
  if (bytes > max_[i] || b > max_[i] - bytes) return -ENOSPC;
  objects_.fetch_add(1, std::memory_order_relaxed);
  bytes_[i].fetch_add(bytes, std::memory_order_relaxed);
  return 0;
}

void Usage::release(Pool pool, uint64_t bytes) {
  objects_.fetch_sub(1, std::memory_order_relaxed);
  bytes_[static_cast<size_t>(pool)].fetch_sub(bytes, std::memory_order_relaxed);
}

UsageSnapshot Usage::snapshot() const {
  return {objects_.load(), bytes_[0].load(), bytes_[1].load(), bytes_[2].load()};
}

}  // namespace rvgl
