#include "queue/health_pacer.h"

#include <algorithm>
#include <new>
#include <mutex>

namespace rvgl {

HealthPacer &HealthPacer::process() {
  // Never destroyed (the engine may outlive statics), and not allocated: its first use may be on
  // a VMM's thread short of memory, in a path that must not fail.
  alignas(HealthPacer) static unsigned char storage[sizeof(HealthPacer)];
  static HealthPacer *p = new (storage) HealthPacer;
  return *p;
}

void HealthPacer::note_busy(int64_t now, int64_t *window) {
  const int64_t w = now / kWindowNs;
  if (*window == w) return;
  *window = w;
  // Two threads may note at once (the engine, and a poll-mode VMM's thread): the roll-over to a
  // new window must not lose the count. Taken at most once per queue per window.
  std::lock_guard lk(mu_);
  const int64_t cur = window_.load(std::memory_order_relaxed);
  if (w != cur) {
    previous_.store(w == cur + 1 ? count_.load(std::memory_order_relaxed) : 0,
                    std::memory_order_relaxed);
    count_.store(0, std::memory_order_relaxed);
    window_.store(w, std::memory_order_relaxed);
  }
  count_.fetch_add(1, std::memory_order_relaxed);
}

int64_t HealthPacer::interval_ns(int64_t now) const {
  const int64_t w = now / kWindowNs;
  const int64_t cur = window_.load(std::memory_order_relaxed);
  uint64_t busy = 0;
  if (w == cur)
    busy =
        std::max(count_.load(std::memory_order_relaxed), previous_.load(std::memory_order_relaxed));
  else if (w == cur + 1)
    busy = count_.load(std::memory_order_relaxed);
  const uint64_t windows = (busy + kLooksPerWindow - 1) / kLooksPerWindow;
  return kWindowNs * static_cast<int64_t>(std::max<uint64_t>(1, windows));
}

}  // namespace rvgl
