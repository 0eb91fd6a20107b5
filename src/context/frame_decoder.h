// Walks one submitted command buffer: several framed requests back to back.
//
// Per request: frame checks (length, alignment, seqno order, response slot), table lookup,
// zero-extension of short requests, the handler, the response written into the shared page, then
// the seqno published. Unknown commands answer -ENOSYS and the walk goes on. A frame that cannot
// be parsed stops the walk, fails the submit with -EINVAL and bumps async_error; requests before
// it stay processed. Nothing is ever written outside the response area.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "context/command_table.h"
#include "context/shmem_view.h"

namespace rvgl {

enum class FrameError {
  kNone = 0,
  kTruncatedHeader,  // fewer than 16 bytes left for a header
  kLengthTooShort,   // len < header size (includes len 0)
  kLengthPastEnd,    // len > bytes left in the buffer
  kLengthUnaligned,  // len not a multiple of 8
  kSeqnoOrder,       // seqno not after the previous request's
  kRspUnaligned,     // rsp_off not a multiple of 8
  kRspOutOfRange,    // response would run past the response area
  kNoSharedPage,     // a request needs a response slot but the context has no shared page
  kTooLarge,         // the whole buffer exceeds the context's submit limit
};

const char *frame_error_name(FrameError e);

struct SubmitOutcome {
  int error = 0;           // 0, or -EINVAL for a bad frame / oversize buffer
  uint32_t processed = 0;  // requests dispatched
  FrameError frame_error = FrameError::kNone;
  size_t error_offset = 0;  // byte offset of the bad frame
};

class FrameDecoder {
 public:
  FrameDecoder(const CommandTable &table, void *target, size_t max_submit_bytes);

  // shmem may be invalid (no shared page yet): then only requests with RVGL_RSP_NONE can run.
  SubmitOutcome run(std::span<const uint8_t> stream, ShmemView &shmem);

  uint32_t last_seqno() const { return last_seqno_; }

  // Called after each request is answered (capture mode); not called for deferred responses.
  using Observer = std::function<void(uint32_t cmd, uint32_t seqno, std::span<const uint8_t> rsp)>;
  void set_observer(Observer o) { observer_ = std::move(o); }

 private:
  const CommandTable &table_;
  void *target_;
  size_t max_submit_bytes_;
  uint32_t last_seqno_ = 0;
  std::vector<uint64_t> scratch_;  // the zero-extended copy of the current request
  Observer observer_;
};

}  // namespace rvgl
