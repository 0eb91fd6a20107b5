// Order statistics over repeated samples: the benchmarks quote medians (robust against the noise of
// a shared machine) and p99 where tails matter.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace rvgl::bench {

// q in [0, 1]; nearest-rank on a sorted copy. 0 for no samples.
inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(rank, v.size() - 1)];
}

inline double median(const std::vector<double> &v) {
  return quantile(v, 0.5);
}

}  // namespace rvgl::bench
