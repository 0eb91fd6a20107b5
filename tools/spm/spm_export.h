// Turns decoded SPM samples into files people open: CSV, a Chrome/Perfetto trace-event JSON with
// one process per XCC and one named counter track per counter, and (spm_plot.h) a PNG.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "spm_counters.h"
#include "spm_decode.h"

namespace rvgl::spm {

struct ExportOptions {
  std::vector<uint32_t> counters;  // which counters to export; empty: the first 8
  // One per counter slot (the recording's, spm_recording.h); a slot without one is "c<index>".
  std::vector<CounterInfo> names;
  uint32_t counter_freq_khz = 100000;
  std::optional<uint32_t> xcc;  // only this XCC; unset: every XCC
  std::string device;           // where the stream was recorded, for titles; may be ""
};

// Rows: xcc, timestamp (ticks), time_us (from the first exported sample), then one column per
// selected counter, headed by its name.
bool write_csv(const std::string &path, const std::vector<Sample> &samples,
               const ExportOptions &opt, std::string *error);

// {"traceEvents": [...]}: per XCC a process ("M" process_name "XCC <n>", process_sort_index),
// holding one "C" counter track per selected counter named for it (ts in us from the first
// sample), and an "X" slice per interval without samples on a thread named "data loss".
bool write_trace_json(const std::string &path, const std::vector<Sample> &samples,
                      const ExportOptions &opt, std::string *error);

std::vector<uint32_t> selected_counters(const ExportOptions &opt, size_t available);
const CounterInfo &counter_info(const ExportOptions &opt, uint32_t counter, CounterInfo *storage);
// The samples the options keep (their XCC), in order.
std::vector<Sample> filter_xcc(const std::vector<Sample> &samples, const ExportOptions &opt);

}  // namespace rvgl::spm
