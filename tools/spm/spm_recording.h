// A recorded SPM stream: the destination buffers a guest got back, as they were retired, with
// what is needed to decode them and the names of the counters. Written by the demo's `spm` mode,
// read by `rvgl-spm`.
//
// File: header (struct SpmRecordingHeader, spm_layout.h); in version 2 then u32 kInfoMagic,
// u32 size and `size` bytes of JSON: {"device": "...", "counters": [["NAME", "UNIT"], ...]}, one
// entry per counter slot of a sample; then records: u32 kRecordMagic, u32 size, then `size` bytes:
// one destination buffer exactly as the kernel filled it (num_xcc slices, each a 32-byte
// rvgl_spm_buffer_header followed by samples). Version 1 files (no names) still read: their
// counters get the layout's names (spm_counters.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "spm_counters.h"
#include "spm_layout.h"

namespace rvgl::spm {

inline constexpr uint32_t kRecordMagic = 0x30465542;  // "BUF0"
inline constexpr uint32_t kInfoMagic = 0x4f464e49;    // "INFO"
inline constexpr uint32_t kRecordingVersion = 2;

// What a recording says about where it was made.
struct RecordingInfo {
  std::string device;                 // e.g. "AMD Radeon RX 7900 XTX (gfx IP 11.0.0)"; may be ""
  std::vector<CounterInfo> counters;  // one per counter slot of a sample
};

struct SpmRecording {
  SpmRecordingHeader header{};
  RecordingInfo info;
  std::vector<std::vector<uint8_t>> buffers;
};

class SpmRecordingWriter {
 public:
  // Writes a version 2 header. false (errno set) when the file cannot be created; false with
  // errno EINVAL when `info` does not name every counter slot of the layout or a name is invalid.
  bool open(const std::string &path, const SpmRecordingHeader &h, const RecordingInfo &info);
  // A version 1 file (no names): what recorders before version 2 wrote.
  bool open_v1(const std::string &path, const SpmRecordingHeader &h);
  bool append(const uint8_t *buf, uint32_t size);
  ~SpmRecordingWriter();

 private:
  bool create(const std::string &path, const SpmRecordingHeader &h, uint32_t version);
  FILE *f_ = nullptr;
};

// Reads and validates a recording; error describes the first problem found.
bool read_recording(const std::string &path, SpmRecording *out, std::string *error);

}  // namespace rvgl::spm
