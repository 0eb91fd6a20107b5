// Reads the event ring of the shared page (PROTOCOL.md §4): records [event_rptr, event_wptr), each
// checked against its 1-based seq, then event_rptr stored so the host can reuse the entries.
//
// The indices come from the host and are not trusted: a write index more than a ring ahead of the
// read index cannot be right, so the excess is skipped and counted instead of being read twice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "rocm_virgl_protocol.h"

namespace rvgl::guest {

struct EventPoll {
  std::vector<rvgl_event> events;  // in order
  uint32_t dropped_by_host = 0;    // growth of event_overflow since the previous poll
  uint32_t discarded = 0;          // records skipped: inconsistent indices or a wrong seq
};

class EventRingReader {
 public:
  EventRingReader() = default;
  // `shmem` is the mapped shared page (RVGL_SHMEM_SIZE bytes). Starts from the event_rptr and
  // event_overflow already there, so a reader created later does not replay consumed records.
  explicit EventRingReader(uint8_t *shmem);

  // Consumes up to `max_events` records.
  EventPoll poll(size_t max_events = RVGL_EVENT_RING_ENTRIES);

  // Records the host has written and this reader has not consumed (at most a ring's worth).
  uint32_t pending() const;
  uint32_t rptr() const { return rptr_; }

 private:
  rvgl_shmem_header *header() const { return reinterpret_cast<rvgl_shmem_header *>(shmem_); }

  uint8_t *shmem_ = nullptr;
  uint32_t rptr_ = 0;
  uint32_t last_overflow_ = 0;
};

}  // namespace rvgl::guest
