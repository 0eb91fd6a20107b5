// Request sequence numbers. The host accepts a request only if its seqno comes after the previous
// one in serial-number order ((int32_t)(seqno - previous) > 0, PROTOCOL.md §5), so seqnos may wrap
// around 2^32 as long as each one is issued after the last.
#pragma once

#include <cstdint>

namespace rvgl::guest {

constexpr bool seqno_after(uint32_t seqno, uint32_t previous) {
  return static_cast<int32_t>(seqno - previous) > 0;
}

class SeqnoCounter {
 public:
  // `last` is the seqno before the first one issued: 0 for a fresh context (the host's starting
  // point), so the first seqno is 1.
  explicit constexpr SeqnoCounter(uint32_t last = 0) : last_(last) {}

  // Never hands out 0: a response slot the host has never written reads seqno 0, so a request
  // numbered 0 could look complete before the host touched it.
  constexpr uint32_t next() {
    ++last_;
    if (last_ == 0) last_ = 1;
    return last_;
  }
  constexpr uint32_t last() const { return last_; }

 private:
  uint32_t last_;
};

}  // namespace rvgl::guest
