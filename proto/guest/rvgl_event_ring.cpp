#include "rvgl_event_ring.h"

#include <cstring>

namespace rvgl::guest {

static_assert((RVGL_EVENT_RING_ENTRIES & (RVGL_EVENT_RING_ENTRIES - 1)) == 0,
              "the ring index is the record count modulo a power of two");

EventRingReader::EventRingReader(uint8_t *shmem) : shmem_(shmem) {
  if (!shmem_) return;
  rptr_ = __atomic_load_n(&header()->event_rptr, __ATOMIC_RELAXED);
  last_overflow_ = __atomic_load_n(&header()->event_overflow, __ATOMIC_RELAXED);
}

uint32_t EventRingReader::pending() const {
  if (!shmem_) return 0;
  const uint32_t avail = __atomic_load_n(&header()->event_wptr, __ATOMIC_ACQUIRE) - rptr_;
  return avail > RVGL_EVENT_RING_ENTRIES ? RVGL_EVENT_RING_ENTRIES : avail;
}

EventPoll EventRingReader::poll(size_t max_events) {
  EventPoll out;
  if (!shmem_) return out;
  // wptr with acquire: the records it counts were stored before it.
  const uint32_t wptr = __atomic_load_n(&header()->event_wptr, __ATOMIC_ACQUIRE);
  const uint32_t overflow = __atomic_load_n(&header()->event_overflow, __ATOMIC_RELAXED);
  out.dropped_by_host = overflow - last_overflow_;
  last_overflow_ = overflow;

  uint32_t avail = wptr - rptr_;
  if (avail > RVGL_EVENT_RING_ENTRIES) {
    // More than a ring ahead (or behind, which wraps to a huge count): only the newest ring's
    // worth can still be in the ring.
    const uint32_t skip = avail - RVGL_EVENT_RING_ENTRIES;
    out.discarded += skip;
    rptr_ += skip;
    avail = RVGL_EVENT_RING_ENTRIES;
  }
  const size_t n = avail < max_events ? avail : max_events;
  out.events.reserve(n);
  const uint8_t *ring = shmem_ + RVGL_EVENT_RING_OFFSET;
  for (size_t i = 0; i < n; ++i) {
    rvgl_event ev;
    std::memcpy(&ev, ring + (rptr_ % RVGL_EVENT_RING_ENTRIES) * sizeof(rvgl_event), sizeof(ev));
    ++rptr_;
    if (ev.seq != rptr_) {
      ++out.discarded;
      continue;
    }
    out.events.push_back(ev);
  }
  // Release: our copies of the records are done before the host may overwrite their entries.
  __atomic_store_n(&header()->event_rptr, rptr_, __ATOMIC_RELEASE);
  return out;
}

}  // namespace rvgl::guest
