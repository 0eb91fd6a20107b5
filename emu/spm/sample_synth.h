// A synthetic SPM sample stream laid out as the RLC writes real samples (Mesa ac_spm.c/ac_spm.h):
// each sample is the global segment followed by one segment per shader engine, every segment made
// of 32-byte lines of 16 x u16 counters; global line 0 opens with a 64-bit timestamp
// (AC_SPM_GLOBAL_TIMESTAMP_COUNTERS = 4 u16). Counters are per-interval counts.
#pragma once

#include <cstdint>

namespace rvgl::emu {

inline constexpr uint32_t kSpmLineBytes = 32;  // AC_SPM_NUM_COUNTER_PER_MUXSEL 16 x u16

struct SpmLayout {
  uint32_t global_lines;
  uint32_t se_lines;
  uint32_t shader_engines;
  uint32_t lines_per_sample() const { return global_lines + se_lines * shader_engines; }
};

// Writes line `line_index` (counted from the stream start) of XCC `xcc` into out[32].
// Sample k is stamped start_ticks + k * ticks_per_sample on the 100 MHz GPU clock.
void synthesize_spm_line(const SpmLayout &layout, uint32_t xcc, uint64_t line_index,
                         uint64_t start_ticks, double ticks_per_sample, uint8_t out[kSpmLineBytes]);

}  // namespace rvgl::emu
