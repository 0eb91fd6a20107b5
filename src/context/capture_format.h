// The capture file format (docs/capture-format.md): what a context received and answered, for
// the trace tool, for fuzz corpora and for bug reports. Little-endian, every record 8-aligned.
#pragma once

#include <cstdint>

namespace rvgl::capture {

inline constexpr char kFileMagic[8] = {'R', 'V', 'G', 'L', 'C', 'A', 'P', '1'};
inline constexpr uint32_t kVersion = 1;

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t ctx_id;
  uint32_t capset_id;
  uint32_t reserved[3];
};
static_assert(sizeof(FileHeader) == 32);

enum RecordType : uint32_t {
  kSubmit = 0x4d425553,    // "SUBM": a command buffer as received; payload = its bytes
  kResponse = 0x50534552,  // "RESP": a response as written; payload = its bytes
  kDone = 0x454e4f44,      // "DONE": the submit's result; no payload
  kFull = 0x4c4c5546,      // "FULL": the capture budget is spent, nothing follows; no payload
};

struct RecordHeader {
  uint32_t type;    // RecordType
  uint32_t length;  // payload bytes (the record is padded to 8 after them)
  uint32_t cmd;     // RESP: the command; DONE: 0
  uint32_t seqno;   // RESP: the request's seqno
  int32_t result;   // RESP: the response's result; DONE: the submit's result
  uint32_t reserved;
  uint64_t time_ns;  // CLOCK_MONOTONIC
};
static_assert(sizeof(RecordHeader) == 32);

}  // namespace rvgl::capture
