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

bool ShmemView::write_response(uint32_t rsp_off, std::span<const uint8_t> rsp) {
  // 64-bit sums: rsp_off comes from the guest and may be near UINT32_MAX.
  if (rsp.size() < sizeof(rvgl_rsp_hdr) ||
      uint64_t{rsp_off} + rsp.size() > uint64_t{RVGL_RSP_AREA_SIZE} || rsp_off % RVGL_ALIGNMENT)
    return false;
  uint8_t *slot = base_ + RVGL_RSP_AREA_OFFSET + rsp_off;
  constexpr size_t seqno_off = offsetof(rvgl_rsp_hdr, seqno);
  std::memcpy(slot, rsp.data(), seqno_off);
  std::memcpy(slot + sizeof(rvgl_rsp_hdr), rsp.data() + sizeof(rvgl_rsp_hdr),
              rsp.size() - sizeof(rvgl_rsp_hdr));
  uint32_t seqno;
  std::memcpy(&seqno, rsp.data() + seqno_off, sizeof(seqno));
  __atomic_store_n(reinterpret_cast<uint32_t *>(slot + seqno_off), seqno, __ATOMIC_RELEASE);
  return true;
}

void ShmemView::publish_seqno(uint32_t seqno) {
  __atomic_store_n(&header()->seqno, seqno, __ATOMIC_RELEASE);
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
