// The host's view of a context's shared page (blob_id 0).
//
// The guest maps the same memory and may write to it at any moment, so the host only stores into
// it (responses, counters, events) and never acts on a value it reads back, except where
// PROTOCOL.md says the guest owns a field (event_rptr), and then only after range checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "rocm_virgl_protocol.h"

namespace rvgl {

class ShmemView {
 public:
  ShmemView() = default;
  // base must stay mapped while the view is used; size >= RVGL_SHMEM_SIZE.
  ShmemView(void *base, size_t size);

  bool valid() const { return base_ != nullptr; }

  // Fills the layout fields of the header; counters start at zero.
  void init_header();

  uint32_t rsp_area_size() const { return RVGL_RSP_AREA_SIZE; }

  // Writes a complete response (header included) at rsp_off of the response area: the body
  // first, then the header's seqno with release order, so a guest that sees its seqno sees the
  // whole response. Returns false, writing nothing, if the slot is not entirely in the area.
  bool write_response(uint32_t rsp_off, std::span<const uint8_t> rsp);

  void publish_seqno(uint32_t seqno);
  void bump_async_error();
  uint32_t async_error() const;
  uint32_t seqno() const;

  rvgl_shmem_header *header() const { return reinterpret_cast<rvgl_shmem_header *>(base_); }
  uint8_t *base() const { return base_; }

 private:
  uint8_t *base_ = nullptr;
};

// Inline: they run once per request on the submit path (issue 13, point 7).
inline bool ShmemView::write_response(uint32_t rsp_off, std::span<const uint8_t> rsp) {
  // 64-bit sums: rsp_off comes from the guest and may be near UINT32_MAX.
  if (rsp.size() < sizeof(rvgl_rsp_hdr) ||
      uint64_t{rsp_off} + rsp.size() > uint64_t{RVGL_RSP_AREA_SIZE} || rsp_off % RVGL_ALIGNMENT)
    return false;
  uint8_t *slot = base_ + RVGL_RSP_AREA_OFFSET + rsp_off;
  constexpr size_t seqno_off = offsetof(rvgl_rsp_hdr, seqno);
  std::memcpy(slot, rsp.data(), seqno_off);
  // Header-only responses (NOP and every error) have no body: no library call for 0 bytes.
  if (rsp.size() > sizeof(rvgl_rsp_hdr))
    std::memcpy(slot + sizeof(rvgl_rsp_hdr), rsp.data() + sizeof(rvgl_rsp_hdr),
                rsp.size() - sizeof(rvgl_rsp_hdr));
  uint32_t seqno;
  std::memcpy(&seqno, rsp.data() + seqno_off, sizeof(seqno));
  __atomic_store_n(reinterpret_cast<uint32_t *>(slot + seqno_off), seqno, __ATOMIC_RELEASE);
  return true;
}

inline void ShmemView::publish_seqno(uint32_t seqno) {
  __atomic_store_n(&header()->seqno, seqno, __ATOMIC_RELEASE);
}

}  // namespace rvgl
