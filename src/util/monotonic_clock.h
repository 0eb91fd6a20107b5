// CLOCK_MONOTONIC in nanoseconds: the clock syncobj waits take their absolute timeouts in, and the
// one every deadline and rate limit of the context type is measured on.
#pragma once

#include <cstdint>
#include <ctime>

namespace rvgl {

inline int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace rvgl
