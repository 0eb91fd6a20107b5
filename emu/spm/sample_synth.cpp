#include "spm/sample_synth.h"

#include <cstring>

namespace rvgl::emu {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser: cheap, well spread, deterministic
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A plausible per-interval count: each counter has its own mean (a few hundred events per
// interval) with noise, the way cache request/hit counters look over one sample interval.
uint16_t counter_value(uint32_t xcc, uint64_t sample, uint32_t slot) {
  const uint32_t mean = 64 + (slot * 37) % 960;
  const uint64_t h = mix((sample << 20) ^ (uint64_t{xcc} << 12) ^ slot);
  return static_cast<uint16_t>(mean - mean / 4 + h % (mean / 2 + 1));
}

}  // namespace

void synthesize_spm_line(const SpmLayout &layout, uint32_t xcc, uint64_t line_index,
                         uint64_t start_ticks, double ticks_per_sample,
                         uint8_t out[kSpmLineBytes]) {
  const uint32_t lps = layout.lines_per_sample();
  const uint64_t sample = line_index / lps;
  const uint32_t line = static_cast<uint32_t>(line_index % lps);
  uint16_t c[16];
  uint32_t first = 0;
  if (line == 0) {
    const uint64_t ts =
        start_ticks + static_cast<uint64_t>(static_cast<double>(sample) * ticks_per_sample);
    std::memcpy(c, &ts, sizeof(ts));
    first = 4;
  }
  for (uint32_t i = first; i < 16; ++i)
    c[i] = counter_value(xcc, sample, line * 16 + i);
  std::memcpy(out, c, kSpmLineBytes);
}

}  // namespace rvgl::emu
