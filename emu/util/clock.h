// Time as the kernel's interfaces express it: CLOCK_MONOTONIC nanoseconds, absolute timeouts.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace rvgl::emu {

using SteadyClock = std::chrono::steady_clock;  // CLOCK_MONOTONIC on Linux
using Deadline = SteadyClock::time_point;

inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline Deadline never() {
  return Deadline::max();
}

// An absolute CLOCK_MONOTONIC deadline in ns as drm_syncobj takes it: 0 or a past time polls.
inline Deadline deadline_from_abs_ns(int64_t abs_ns) {
  const int64_t now = static_cast<int64_t>(monotonic_ns());
  if (abs_ns <= now) return SteadyClock::now();
  // Callers pass INT64_MAX for "forever"; anything beyond a year is that too (and would overflow
  // the time_point arithmetic).
  constexpr int64_t kYearNs = 365ll * 24 * 3600 * 1000000000ll;
  if (abs_ns - now > kYearNs) return never();
  return SteadyClock::now() + std::chrono::nanoseconds(abs_ns - now);
}

// amdgpu_gem_timeout(): a negative value (as s64) waits forever, otherwise it is absolute.
inline Deadline deadline_from_amdgpu_timeout(uint64_t timeout_ns) {
  if (static_cast<int64_t>(timeout_ns) < 0) return never();
  return deadline_from_abs_ns(static_cast<int64_t>(timeout_ns));
}

inline Deadline deadline_after_ms(uint64_t ms) {
  return SteadyClock::now() + std::chrono::milliseconds(ms);
}

// The GPU's free-running counter: 100 MHz on both profiles (DEV_INFO gpu_counter_freq 100000 kHz).
inline uint64_t gpu_clock_ticks() {
  return monotonic_ns() / 10;
}

}  // namespace rvgl::emu
