#include "memory/usage.h"

#include <cerrno>

namespace rvgl {

int Usage::charge(Pool pool, uint64_t bytes, uint64_t objects) {
  const auto i = static_cast<size_t>(pool);
  // Single writer (the VMM thread); releases may come from other threads (an object dying on an
  // SPM worker), which only ever make room.
  const uint64_t b = bytes_[i].load(std::memory_order_relaxed);
  const uint64_t o = objects_.load(std::memory_order_relaxed);
  if (objects > max_objects_ || o > max_objects_ - objects) return -ENOSPC;
  if (bytes > max_[i] || b > max_[i] - bytes) return -ENOSPC;
  if (pool == Pool::kDoorbell) {
    // Other contexts' threads charge it too.
    uint64_t all = process_doorbell_.load(std::memory_order_relaxed);
    do {
      if (bytes > max_process_doorbell_ || all > max_process_doorbell_ - bytes) return -ENOSPC;
    } while (!process_doorbell_.compare_exchange_weak(all, all + bytes, std::memory_order_relaxed));
  }
  objects_.fetch_add(objects, std::memory_order_relaxed);
  bytes_[i].fetch_add(bytes, std::memory_order_relaxed);
  return 0;
}

void Usage::release(Pool pool, uint64_t bytes, uint64_t objects) {
  if (pool == Pool::kDoorbell) process_doorbell_.fetch_sub(bytes, std::memory_order_relaxed);
  objects_.fetch_sub(objects, std::memory_order_relaxed);
  bytes_[static_cast<size_t>(pool)].fetch_sub(bytes, std::memory_order_relaxed);
}

uint64_t Usage::objects_left() const {
  const uint64_t o = objects_.load(std::memory_order_relaxed);
  return o < max_objects_ ? max_objects_ - o : 0;
}

UsageSnapshot Usage::snapshot() const {
  return {objects_.load(), bytes_[0].load(), bytes_[1].load(), bytes_[2].load()};
}

}  // namespace rvgl
