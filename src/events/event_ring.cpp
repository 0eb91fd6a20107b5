#include "events/event_ring.h"

#include <cstring>

namespace rvgl {

void EventRing::attach(ShmemView view) {
  std::lock_guard lk(mu_);
  view_ = view;
  attached_ = true;
}

bool EventRing::attached() const {
  std::lock_guard lk(mu_);
  return attached_;
}

bool EventRing::post(uint32_t type, uint32_t queue, uint64_t payload0, uint64_t payload1) {
  std::lock_guard lk(mu_);
  if (!attached_) {
    ++unattached_;
    return false;
  }
  rvgl_shmem_header *h = view_.header();
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
  points_.fetch_add(1, std::memory_order_acq_rel);  // 64-bit: never goes backwards
  return true;
}

uint32_t EventRing::written() const {
  std::lock_guard lk(mu_);
  return wptr_;
}

uint32_t EventRing::overflows() const {
  std::lock_guard lk(mu_);
  return overflow_;
}

uint32_t EventRing::dropped_unattached() const {
  std::lock_guard lk(mu_);
  return unattached_;
}

uint64_t EventRing::fence_point() const {
  std::lock_guard lk(mu_);
  if (!attached_ || __atomic_load_n(&view_.header()->event_rptr, __ATOMIC_ACQUIRE) != wptr_)
    return 0;
  return points_.load(std::memory_order_relaxed) + 1;  // written under mu_ (post())
}

}  // namespace rvgl
