// Decodes retired SPM destination buffers into samples (docs/spm.md): each buffer holds one slice
// per XCC, a slice being a 32-byte header (version, bytes_copied, has_data_loss) and then
// bytes_copied bytes of whole samples; a sample is lines_per_sample 32-byte lines of 16 x u16,
// the first four u16 of line 0 being the 64-bit timestamp.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "spm_layout.h"

namespace rvgl::spm {

struct Sample {
  uint32_t xcc;
  uint64_t timestamp;              // GPU clock ticks
  std::vector<uint16_t> counters;  // every u16 of the sample but the timestamp
};

struct DecodeStats {
  uint64_t buffers = 0;
  uint64_t slices = 0;
  uint64_t samples = 0;
  uint64_t bytes = 0;
  uint64_t slices_with_loss = 0;
  uint64_t timestamp_regressions = 0;  // a sample older than the previous one of its XCC
};

// What one buffer leaves for the next when buffers are decoded as one stream: the hardware writes
// 32-byte lines, so a slice may end inside a sample that the same XCC's next slice completes.
struct StreamState {
  std::map<uint32_t, std::vector<uint8_t>> partial;  // per XCC: the start of an unfinished sample
  std::map<uint32_t, uint64_t> last_timestamp;       // per XCC
};

// Appends the samples of one buffer; false (error set) if a header lies about its size. With a
// StreamState, samples split across consecutive buffers are joined (a slice that reports data
// loss drops the unfinished one); without, bytes after the slice's last whole sample are ignored.
bool decode_buffer(const SpmRecordingHeader &layout, std::span<const uint8_t> buf,
                   std::vector<Sample> *out, DecodeStats *stats, std::string *error,
                   StreamState *stream = nullptr);

uint32_t lines_per_sample(const SpmRecordingHeader &h);
uint32_t counters_per_sample(const SpmRecordingHeader &h);

}  // namespace rvgl::spm
