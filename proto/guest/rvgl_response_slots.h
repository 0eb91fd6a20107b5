// Hands out response slots in the shared page's response area.
//
// The host writes a response into its slot whenever the request runs, which can be long after the
// submit (SPM_SET_DEST answers from a worker), so a slot stays reserved until its response has
// arrived and the caller releases it. Slots are carved from the area as a ring in allocation
// order; space is reclaimed from the oldest slot forward, so a slot released out of order frees
// its space once every older slot is released too. Offsets are relative to the response area.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>

#include "rocm_virgl_protocol.h"

namespace rvgl::guest {

struct ResponseSlot {
  uint32_t offset = 0;  // into the response area, multiple of RVGL_ALIGNMENT
  uint32_t size = 0;    // multiple of RVGL_ALIGNMENT
  uint32_t seqno = 0;   // of the request that owns it
};

class ResponseSlotAllocator {
 public:
  explicit ResponseSlotAllocator(uint32_t area_size = RVGL_RSP_AREA_SIZE);

  // A slot of at least `size` bytes (rounded up to 8) for the request numbered `seqno`, or
  // nothing when the free space is too small or fragmented: release slots and retry.
  std::optional<ResponseSlot> allocate(uint32_t size, uint32_t seqno);

  // Gives back the slot at `offset` owned by `seqno`. Anything else is ignored (returns false), so
  // a double or stale release cannot free a slot that now belongs to another request.
  bool release(uint32_t offset, uint32_t seqno);

  // Releases every reserved slot for which `arrived` returns true; returns how many.
  size_t release_if(const std::function<bool(const ResponseSlot &)> &arrived);

  // Calls `fn` for each slot still reserved, oldest first.
  void for_each_reserved(const std::function<void(const ResponseSlot &)> &fn) const;

  size_t reserved_count() const;
  uint32_t area_size() const { return area_size_; }

 private:
  struct Entry {
    ResponseSlot slot;
    bool released;
  };
  void drop_released_front();

  uint32_t area_size_;
  std::deque<Entry> ring_;  // allocation order; offsets ascend, except one step down at a wrap
};

}  // namespace rvgl::guest
