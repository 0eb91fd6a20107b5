#include "rvgl_shared_page.h"

#include <cerrno>
#include <string>

namespace rvgl::guest {

Status SharedPage::validate_layout() const {
  if (!valid()) return make_error(-EINVAL, "shared page: not mapped or smaller than 64 KiB");
  rvgl_shmem_header h;
  std::memcpy(&h, base_, sizeof(h));
  auto mismatch = [](const char *field, uint32_t got, uint32_t want) {
    return make_error(-EPROTO, std::string("shared page: ") + field + " is " + std::to_string(got) +
                                   ", this library expects " + std::to_string(want));
  };
  if (h.layout_version != RVGL_WIRE_FORMAT_VERSION)
    return mismatch("layout_version", h.layout_version, RVGL_WIRE_FORMAT_VERSION);
  if (h.rsp_area_offset != RVGL_RSP_AREA_OFFSET)
    return mismatch("rsp_area_offset", h.rsp_area_offset, RVGL_RSP_AREA_OFFSET);
  if (h.rsp_area_size != RVGL_RSP_AREA_SIZE)
    return mismatch("rsp_area_size", h.rsp_area_size, RVGL_RSP_AREA_SIZE);
  if (h.event_ring_offset != RVGL_EVENT_RING_OFFSET)
    return mismatch("event_ring_offset", h.event_ring_offset, RVGL_EVENT_RING_OFFSET);
  if (h.event_ring_entries != RVGL_EVENT_RING_ENTRIES)
    return mismatch("event_ring_entries", h.event_ring_entries, RVGL_EVENT_RING_ENTRIES);
  return {};
}

bool SharedPage::slot_in_area(uint32_t off, uint32_t size) const {
  return valid() && off % RVGL_ALIGNMENT == 0 && size >= sizeof(rvgl_rsp_hdr) &&
         size <= RVGL_MAX_RSP_SIZE && uint64_t{off} + size <= RVGL_RSP_AREA_SIZE;
}

bool SharedPage::seqno_at(uint32_t off, uint32_t seqno) const {
  const auto *p = reinterpret_cast<const uint32_t *>(base_ + RVGL_RSP_AREA_OFFSET + off +
                                                     offsetof(rvgl_rsp_hdr, seqno));
  return __atomic_load_n(p, __ATOMIC_ACQUIRE) == seqno;
}

void SharedPage::prepare(const ResponseTicket &t) {
  if (!t.has_response() || !slot_in_area(t.rsp_off, t.rsp_size)) return;
  auto *p = reinterpret_cast<uint32_t *>(base_ + RVGL_RSP_AREA_OFFSET + t.rsp_off +
                                         offsetof(rvgl_rsp_hdr, seqno));
  __atomic_store_n(p, ~t.seqno, __ATOMIC_RELAXED);
}

bool SharedPage::arrived(const ResponseTicket &t) const {
  return t.has_response() && slot_in_area(t.rsp_off, t.rsp_size) && seqno_at(t.rsp_off, t.seqno);
}

bool SharedPage::arrived(const ResponseSlot &s) const {
  return slot_in_area(s.offset, s.size) && seqno_at(s.offset, s.seqno);
}

Result<Response> SharedPage::read(const ResponseTicket &t) const {
  if (!t.has_response()) return make_error(-EINVAL, "request asked for no response");
  if (!slot_in_area(t.rsp_off, t.rsp_size))
    return make_error(-EINVAL, "response slot outside the response area");
  if (!seqno_at(t.rsp_off, t.seqno)) return make_error(-EAGAIN, "response has not arrived");
  Response r;
  r.cmd = t.cmd;
  r.seqno = t.seqno;
  r.size = t.rsp_size;
  std::memcpy(r.bytes.data(), base_ + RVGL_RSP_AREA_OFFSET + t.rsp_off, t.rsp_size);
  rvgl_rsp_hdr h;
  std::memcpy(&h, r.bytes.data(), sizeof(h));
  // The copy may race with a misbehaving host rewriting the slot; report what was copied, but
  // never a seqno other than the one that completed.
  r.result = h.result;
  return r;
}

uint32_t SharedPage::load_header_word(size_t offset) const {
  if (!valid()) return 0;
  return __atomic_load_n(reinterpret_cast<const uint32_t *>(base_ + offset), __ATOMIC_ACQUIRE);
}

uint32_t SharedPage::last_seqno() const {
  return load_header_word(offsetof(rvgl_shmem_header, seqno));
}

uint32_t SharedPage::async_error() const {
  return load_header_word(offsetof(rvgl_shmem_header, async_error));
}

}  // namespace rvgl::guest
