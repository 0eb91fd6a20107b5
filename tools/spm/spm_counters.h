// What each 16-bit slot of an SPM sample counts: a name and a unit per counter, and the selection
// a user makes among them (by index or by name).
//
// The guest protocol carries no counter selection (the host programs the SPM), so the names come
// from the layout of the device the recording was made on: the RLC writes a global segment and one
// segment per shader engine (Mesa ac_spm.c), and a counter is named for the segment and position
// it occupies there. A host that knows what it programmed gives its own names (a names file).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "spm_layout.h"

namespace rvgl::spm {

struct CounterInfo {
  std::string name;  // [A-Za-z0-9_.:-]+, so it is safe in CSV headers and gnuplot strings
  std::string unit;  // printable ASCII without quotes, commas or backslashes
};

// The unit of every SPM counter: the RLC stores what a counter counted during one sample interval.
inline constexpr std::string_view kPerSampleUnit = "events/sample";

// One name per counter slot of `layout` (counters_per_sample of them): GLOBAL_<i> for the global
// segment's counters after the timestamp, SE<s>_<i> for shader engine s's.
std::vector<CounterInfo> layout_counter_names(const SpmRecordingHeader &layout);

bool valid_counter_name(std::string_view name);
bool valid_counter_unit(std::string_view unit);

// Reads a names file: one counter per line, "INDEX NAME [UNIT...]", '#' starts a comment. Names
// the lines give replace those in `names` (whose size bounds INDEX); false with error otherwise.
bool read_counter_names(const std::string &path, std::vector<CounterInfo> *names,
                        std::string *error);

// Resolves a --counters selection: each item an index, a name, or "all"; empty: the first
// `default_count`. Duplicates are kept once, in the order given.
bool select_counters(const std::vector<std::string> &spec, const std::vector<CounterInfo> &names,
                     size_t default_count, std::vector<uint32_t> *out, std::string *error);

}  // namespace rvgl::spm
