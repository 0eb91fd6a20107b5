// This process's resident memory, from /proc/self/statm (pages resident, field 2).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>

namespace rvgl::bench {

inline uint64_t resident_bytes() {
  std::FILE *f = std::fopen("/proc/self/statm", "re");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<uint64_t>(resident) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE))
                : 0;
}

}  // namespace rvgl::bench
