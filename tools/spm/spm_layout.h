// The layout of a recorded SPM stream's samples, as the recording file's header stores it.
#pragma once

#include <cstdint>

namespace rvgl::spm {

inline constexpr char kFileMagic[8] = {'R', 'V', 'G', 'L', 'S', 'P', 'M', '1'};

struct SpmRecordingHeader {
  char magic[8];
  uint32_t version;           // 1, or 2 when counter names follow (spm_recording.h)
  uint32_t num_xcc;           // slices per buffer
  uint32_t global_lines;      // 32-byte lines of the global segment of one sample
  uint32_t se_lines;          // lines per shader-engine segment
  uint32_t shader_engines;    // segments after the global one
  uint32_t counter_freq_khz;  // timestamp clock
};
static_assert(sizeof(SpmRecordingHeader) == 32);

}  // namespace rvgl::spm
