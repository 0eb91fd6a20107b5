#include "context/shmem_view.h"

#include <cstring>

namespace rvgl {

ShmemView::ShmemView(void *base, size_t size)
    : base_(size >= RVGL_SHMEM_SIZE ? static_cast<uint8_t *>(base) : nullptr) {}

void ShmemView::init_header() {
  rvgl_shmem_header h{};
  h.layout_version = RVGL_WIRE_FORMAT_VERSION;
  h.rsp_area_offset = RVGL_RSP_AREA_OFFSET;
  h.rsp_area_size = RVGL_RSP_AREA_SIZE;
  h.event_ring_offset = RVGL_EVENT_RING_OFFSET;
  h.event_ring_entries = RVGL_EVENT_RING_ENTRIES;
  std::memcpy(base_, &h, sizeof(h));
}

void ShmemView::bump_async_error() {
  __atomic_fetch_add(&header()->async_error, 1, __ATOMIC_RELAXED);
}

uint32_t ShmemView::async_error() const {
  return __atomic_load_n(&header()->async_error, __ATOMIC_RELAXED);
}

uint32_t ShmemView::seqno() const {
  return __atomic_load_n(&header()->seqno, __ATOMIC_ACQUIRE);
}

}  // namespace rvgl
