#include "events/event_ring.h"

#include <cstring>

namespace rvgl {

bool EventRing::post(uint32_t type, uint32_t queue, uint64_t payload0, uint64_t payload1) {
  rvgl_shmem_header *h = view_.header();
  {
    std::lock_guard lk(mu_);
    // The guest owns event_rptr: only ever compared, never used as an index.
    const uint32_t rptr = __atomic_load_n(&h->event_rptr, __ATOMIC_ACQUIRE);
    if (wptr_ - rptr >= RVGL_EVENT_RING_ENTRIES) {
      __atomic_store_n(&h->event_overflow, ++overflow_, __ATOMIC_RELEASE);
      return false;
    }
    rvgl_event e{};
    e.seq = wptr_ + 1;
    e.type = type;
    e.queue = queue;
    e.payload[0] = payload0;
    e.payload[1] = payload1;
    uint8_t *slot = view_.base() + RVGL_EVENT_RING_OFFSET +
                    (wptr_ % RVGL_EVENT_RING_ENTRIES) * sizeof(rvgl_event);
    std::memcpy(slot, &e, sizeof(e));
    ++wptr_;
    __atomic_store_n(&h->event_wptr, wptr_, __ATOMIC_RELEASE);
    timeline_->signal(++points_);  // 64-bit: a timeline must never go backwards
  }
  kick_();
  return true;
}

uint32_t EventRing::written() const {
  std::lock_guard lk(mu_);
  return wptr_;
}

uint64_t EventRing::points() const {
  std::lock_guard lk(mu_);
  return points_;
}

uint32_t EventRing::overflows() const {
  std::lock_guard lk(mu_);
  return overflow_;
}

bool EventRing::unread() const {
  std::lock_guard lk(mu_);
  return __atomic_load_n(&view_.header()->event_rptr, __ATOMIC_ACQUIRE) != wptr_;
}

}  // namespace rvgl
