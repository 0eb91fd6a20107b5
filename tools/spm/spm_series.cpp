#include "spm_series.h"

#include <algorithm>
#include <limits>

namespace rvgl::spm {

namespace {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (v.size() % 2) return v[mid];
  const double hi = v[mid];
  return (*std::max_element(v.begin(), v.begin() + mid) + hi) / 2;
}

std::vector<uint64_t> timestamps_of(const std::vector<Sample> &samples, uint32_t xcc) {
  std::vector<uint64_t> ts;
  for (const auto &s : samples)
    if (s.xcc == xcc) ts.push_back(s.timestamp);
  return ts;
}

double median_interval(const std::vector<uint64_t> &ts) {
  std::vector<double> d;
  for (size_t i = 1; i < ts.size(); ++i)
    if (ts[i] > ts[i - 1]) d.push_back(static_cast<double>(ts[i] - ts[i - 1]));
  return median_of(std::move(d));
}

}  // namespace

TimeAxis choose_time_axis(const std::vector<Sample> &samples, const std::vector<uint32_t> &xccs,
                          uint32_t freq_khz) {
  TimeAxis a;
  uint64_t lo = std::numeric_limits<uint64_t>::max(), hi = 0;
  for (const auto &s : samples) {
    if (!xccs.empty() && std::find(xccs.begin(), xccs.end(), s.xcc) == xccs.end()) continue;
    lo = std::min(lo, s.timestamp);
    hi = std::max(hi, s.timestamp);
  }
  if (lo > hi) lo = hi = 0;
  a.t0 = lo;
  const double ticks_per_us = freq_khz ? freq_khz / 1000.0 : 1.0;
  const double span_us = static_cast<double>(hi - lo) / ticks_per_us;
  if (span_us < 2000) {
    a.unit = "us";
    a.ticks_per_unit = ticks_per_us;
  } else if (span_us < 2e6) {
    a.unit = "ms";
    a.ticks_per_unit = ticks_per_us * 1e3;
  } else {
    a.unit = "s";
    a.ticks_per_unit = ticks_per_us * 1e6;
  }
  a.span = static_cast<double>(hi - lo) / a.ticks_per_unit;
  return a;
}

std::vector<uint32_t> xccs_present(const std::vector<Sample> &samples) {
  std::vector<uint32_t> out;
  for (const auto &s : samples)
    if (std::find(out.begin(), out.end(), s.xcc) == out.end()) out.push_back(s.xcc);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Gap> find_gaps(const std::vector<Sample> &samples, uint32_t xcc) {
  const std::vector<uint64_t> ts = timestamps_of(samples, xcc);
  const double limit = 1.5 * median_interval(ts);
  std::vector<Gap> out;
  for (size_t i = 1; i < ts.size(); ++i)
    if (ts[i] > ts[i - 1] && static_cast<double>(ts[i] - ts[i - 1]) > limit)
      out.push_back({xcc, ts[i - 1], ts[i]});
  return out;
}

CounterStats counter_stats(const std::vector<Sample> &samples, uint32_t xcc, uint32_t counter,
                           uint32_t freq_khz) {
  CounterStats st;
  std::vector<double> v;
  for (const auto &s : samples)
    if (s.xcc == xcc && counter < s.counters.size()) v.push_back(s.counters[counter]);
  st.samples = v.size();
  if (v.empty()) return st;
  st.min = *std::min_element(v.begin(), v.end());
  st.max = *std::max_element(v.begin(), v.end());
  double sum = 0;
  for (double x : v)
    sum += x;
  st.mean = sum / static_cast<double>(v.size());
  st.median = median_of(std::move(v));
  const double interval = median_interval(timestamps_of(samples, xcc));  // ticks
  const double hz = freq_khz ? freq_khz * 1000.0 : 1e6;
  if (interval > 0) st.per_second = st.mean * hz / interval;
  return st;
}

std::vector<double> moving_average(const std::vector<double> &v, size_t window) {
  std::vector<double> out(v.size());
  const size_t half = window / 2;
  double sum = 0;
  size_t lo = 0, hi = 0;  // the values in [lo, hi) are summed
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t want_lo = i > half ? i - half : 0, want_hi = std::min(v.size(), i + half + 1);
    for (; hi < want_hi; ++hi)
      sum += v[hi];
    for (; lo < want_lo; ++lo)
      sum -= v[lo];
    out[i] = sum / static_cast<double>(hi - lo);
  }
  return out;
}

}  // namespace rvgl::spm
