// CLOCK_MONOTONIC in nanoseconds: the emulator's GPU clock counts the same time (in 10 ns ticks),
// so host and "GPU" instants can be subtracted.
#pragma once

#include <time.h>

#include <cstdint>

namespace rvgl::bench {

inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The emulated GPU counter runs at 100 MHz (DEV_INFO gpu_counter_freq).
constexpr uint64_t kGpuTickNs = 10;

}  // namespace rvgl::bench
