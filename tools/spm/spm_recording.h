// A recorded SPM stream: the destination buffers a guest got back, as they were retired, with
// what is needed to decode them. Written by the demo's `spm` mode, read by `rvgl-spm`.
//
// File: header (struct SpmRecordingHeader), then records: u32 kRecordMagic, u32 size, then `size`
// bytes: one destination buffer exactly as the kernel filled it (num_xcc slices, each a 32-byte
// rvgl_spm_buffer_header followed by samples).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace rvgl::spm {

inline constexpr char kFileMagic[8] = {'R', 'V', 'G', 'L', 'S', 'P', 'M', '1'};
inline constexpr uint32_t kRecordMagic = 0x30465542;  // "BUF0"

struct SpmRecordingHeader {
  char magic[8];
  uint32_t version;           // 1
  uint32_t num_xcc;           // slices per buffer
  uint32_t global_lines;      // 32-byte lines of the global segment of one sample
  uint32_t se_lines;          // lines per shader-engine segment
  uint32_t shader_engines;    // segments after the global one
  uint32_t counter_freq_khz;  // timestamp clock
};
static_assert(sizeof(SpmRecordingHeader) == 32);

struct SpmRecording {
  SpmRecordingHeader header{};
  std::vector<std::vector<uint8_t>> buffers;
};

class SpmRecordingWriter {
 public:
  // false (errno set) when the file cannot be created.
  bool open(const std::string &path, const SpmRecordingHeader &h);
  bool append(const uint8_t *buf, uint32_t size);
  ~SpmRecordingWriter();

 private:
  FILE *f_ = nullptr;
};

// Reads and validates a recording; error describes the first problem found.
bool read_recording(const std::string &path, SpmRecording *out, std::string *error);

}  // namespace rvgl::spm
