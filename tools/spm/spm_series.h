// Decoded samples arranged for people: time from the first sample in a unit chosen by the span,
// per-XCC series, the gaps where samples are missing (data loss), and per-counter statistics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "spm_decode.h"

namespace rvgl::spm {

struct TimeAxis {
  uint64_t t0 = 0;              // ticks of the first sample shown
  double ticks_per_unit = 1.0;  // e.g. 100000 for ms on a 100 MHz clock
  std::string unit = "us";      // "us", "ms" or "s"
  double span = 0.0;            // last sample - first sample, in `unit`
  double to_unit(uint64_t ticks) const { return static_cast<double>(ticks - t0) / ticks_per_unit; }
};

// The samples of `xccs` (all when empty); the unit keeps the span's figures readable (under 2 ms:
// us, under 2 s: ms, else s). freq_khz 0 is taken as ticks of 1 us.
TimeAxis choose_time_axis(const std::vector<Sample> &samples, const std::vector<uint32_t> &xccs,
                          uint32_t freq_khz);

// The XCCs that have samples, in order.
std::vector<uint32_t> xccs_present(const std::vector<Sample> &samples);

// An interval without samples, in ticks: from the last sample before it to the first after.
struct Gap {
  uint32_t xcc;
  uint64_t from, to;
};

// Where consecutive samples of one XCC lie more than 1.5 median intervals apart: samples the
// ring dropped (slices then report has_data_loss) or that the stream never took.
std::vector<Gap> find_gaps(const std::vector<Sample> &samples, uint32_t xcc);

struct CounterStats {
  uint64_t samples = 0;
  double min = 0, median = 0, max = 0, mean = 0;
  double per_second = 0;  // mean / median sample interval
};

CounterStats counter_stats(const std::vector<Sample> &samples, uint32_t xcc, uint32_t counter,
                           uint32_t freq_khz);

// A centred moving average over `window` values (odd; shrinks at the ends).
std::vector<double> moving_average(const std::vector<double> &v, size_t window);

}  // namespace rvgl::spm
