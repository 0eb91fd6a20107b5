#include "rvgl_response_slots.h"

namespace rvgl::guest {

ResponseSlotAllocator::ResponseSlotAllocator(uint32_t area_size)
    : area_size_(area_size - area_size % RVGL_ALIGNMENT) {}

std::optional<ResponseSlot> ResponseSlotAllocator::allocate(uint32_t size, uint32_t seqno) {
  if (size == 0 || size > area_size_) return std::nullopt;
  const uint32_t need = (size + RVGL_ALIGNMENT - 1) / RVGL_ALIGNMENT * RVGL_ALIGNMENT;

  uint32_t offset;
  if (ring_.empty()) {
    offset = 0;  // nothing reserved: start over at the bottom, the largest free run
  } else {
    const uint32_t tail = ring_.front().slot.offset;  // oldest reserved byte
    const ResponseSlot &newest = ring_.back().slot;
    const uint32_t head = newest.offset + newest.size;  // first byte after the newest slot
    const bool wrapped = newest.offset < tail;
    if (!wrapped) {
      // Reserved: [tail, head). Free: [head, end) then [0, tail).
      if (uint64_t{head} + need <= area_size_) {
        offset = head;
      } else if (need <= tail) {
        offset = 0;
      } else {
        return std::nullopt;
      }
    } else {
      // Reserved: [tail, end) and [0, head). Free: [head, tail).
      if (uint64_t{head} + need <= tail) {
        offset = head;
      } else {
        return std::nullopt;
      }
    }
  }
  ResponseSlot slot{offset, need, seqno};
  ring_.push_back({slot, false});
  return slot;
}

bool ResponseSlotAllocator::release(uint32_t offset, uint32_t seqno) {
  for (auto &e : ring_) {
    if (e.slot.offset == offset && e.slot.seqno == seqno && !e.released) {
      e.released = true;
      drop_released_front();
      return true;
    }
  }
  return false;
}

size_t ResponseSlotAllocator::release_if(const std::function<bool(const ResponseSlot &)> &arrived) {
  size_t n = 0;
  for (auto &e : ring_) {
    if (!e.released && arrived(e.slot)) {
      e.released = true;
      ++n;
    }
  }
  drop_released_front();
  return n;
}

void ResponseSlotAllocator::for_each_reserved(
    const std::function<void(const ResponseSlot &)> &fn) const {
  for (const auto &e : ring_)
    if (!e.released) fn(e.slot);
}

size_t ResponseSlotAllocator::reserved_count() const {
  size_t n = 0;
  for (const auto &e : ring_)
    n += !e.released;
  return n;
}

void ResponseSlotAllocator::drop_released_front() {
  while (!ring_.empty() && ring_.front().released)
    ring_.pop_front();
}

}  // namespace rvgl::guest
