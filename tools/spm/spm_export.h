// Turns decoded SPM samples into files people open: CSV, a Chrome/Perfetto trace-event JSON with
// one counter track per counter, and a PNG plot (rendered by gnuplot).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "spm_decode.h"

namespace rvgl::spm {

struct ExportOptions {
  std::vector<uint32_t> counters;  // which counters to export; empty: the first 8
  uint32_t counter_freq_khz = 100000;
};

// Rows: xcc, timestamp (ticks), time_us, then one column per selected counter.
bool write_csv(const std::string &path, const std::vector<Sample> &samples,
               const ExportOptions &opt, std::string *error);

// {"traceEvents": [...]} with "C" (counter) events: one track per (XCC, counter), ts in us.
bool write_trace_json(const std::string &path, const std::vector<Sample> &samples,
                      const ExportOptions &opt, std::string *error);

// Counters over time, one line per selected counter of XCC 0, via gnuplot's png terminal.
bool write_png(const std::string &path, const std::vector<Sample> &samples,
               const ExportOptions &opt, std::string *error);

std::vector<uint32_t> selected_counters(const ExportOptions &opt, size_t available);

}  // namespace rvgl::spm
