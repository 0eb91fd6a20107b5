#include "rvgl_request_encoder.h"

#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

namespace rvgl::guest {

namespace {

template <class T>
std::span<const uint8_t> as_bytes_of(std::span<const T> s) {
  return {reinterpret_cast<const uint8_t *>(s.data()), s.size_bytes()};
}

}  // namespace

RequestEncoder::~RequestEncoder() {
  if (submitted_ || !seq_) return;
  for (const auto &t : tickets_)
    if (t.has_response()) seq_->slots().release(t.rsp_off, t.seqno);
}

RequestEncoder::RequestEncoder(RequestEncoder &&o) noexcept
    : seq_(std::exchange(o.seq_, nullptr)),
      buf_(std::move(o.buf_)),
      tickets_(std::move(o.tickets_)),
      first_seqno_(o.first_seqno_),
      last_seqno_(o.last_seqno_),
      submitted_(o.submitted_) {}

Result<ResponseTicket> RequestEncoder::append(uint32_t cmd, const void *req, size_t req_size,
                                              uint32_t rsp_size, Reply reply,
                                              std::span<const std::span<const uint8_t>> tails) {
  if (!seq_) return make_error(-EINVAL, "encoder was moved from");
  uint64_t len = req_size;
  for (auto t : tails)
    len += t.size();
  if (len > std::numeric_limits<uint32_t>::max() - RVGL_ALIGNMENT)
    return make_error(-E2BIG, "request longer than a 32-bit length");
  const uint64_t padded = (len + RVGL_ALIGNMENT - 1) / RVGL_ALIGNMENT * RVGL_ALIGNMENT;

  // Take the seqno only once the slot is secured, so a failed append leaves no gap.
  SeqnoCounter probe = seq_->seqnos();
  const uint32_t seqno = probe.next();

  ResponseTicket t{cmd, seqno, RVGL_RSP_NONE, 0};
  if (reply == Reply::kWanted) {
    auto slot = seq_->slots().allocate(rsp_size, seqno);
    // Asked again while it releases something: a reclaim may release only slots behind the
    // oldest one in flight (their responses came in while it looked), which frees no room in
    // the ring. Each round releases at least one more slot, so this ends.
    while (!slot && seq_->reclaimer() && seq_->reclaimer()->reclaim(seq_->slots()) > 0)
      slot = seq_->slots().allocate(rsp_size, seqno);
    if (!slot) return make_error(-ENOSPC, "response area full: responses still in flight");
    t.rsp_off = slot->offset;
    t.rsp_size = slot->size;
  }
  seq_->seqnos() = probe;

  const size_t at = buf_.size();
  buf_.resize(at + padded, 0);
  uint8_t *p = buf_.data() + at;
  std::memcpy(p, req, req_size);
  const rvgl_req_hdr hdr{cmd, static_cast<uint32_t>(padded), seqno, t.rsp_off};
  std::memcpy(p, &hdr, sizeof(hdr));
  size_t pos = req_size;
  for (auto tail : tails) {
    if (!tail.empty()) std::memcpy(p + pos, tail.data(), tail.size());
    pos += tail.size();
  }

  if (tickets_.empty()) first_seqno_ = seqno;
  last_seqno_ = seqno;
  tickets_.push_back(t);
  return t;
}

Result<ResponseTicket> RequestEncoder::nop(Reply reply) {
  rvgl_req_nop r{};
  return append<rvgl_req_nop, rvgl_rsp_nop>(RVGL_CMD_NOP, r, reply);
}

Result<ResponseTicket> RequestEncoder::query_info(uint32_t query, Reply reply) {
  rvgl_req_query_info r{};
  r.query = query;
  return append<rvgl_req_query_info, rvgl_rsp_query_info>(RVGL_CMD_QUERY_INFO, r, reply);
}

Result<ResponseTicket> RequestEncoder::bo_create(const BoCreateArgs &a, Reply reply) {
  rvgl_req_bo_create r{};
  r.size = a.size;
  r.alignment = a.alignment;
  r.domain = a.domain;
  r.flags = a.flags;
  r.blob_id = a.blob_id;
  return append<rvgl_req_bo_create, rvgl_rsp_bo_create>(RVGL_CMD_BO_CREATE, r, reply);
}

Result<ResponseTicket> RequestEncoder::bo_free(uint32_t bo, Reply reply) {
  rvgl_req_bo_free r{};
  r.bo = bo;
  return append<rvgl_req_bo_free, rvgl_rsp_bo_free>(RVGL_CMD_BO_FREE, r, reply);
}

Result<ResponseTicket> RequestEncoder::va_map(const VaMapArgs &a, Reply reply) {
  rvgl_req_va_map r{};
  r.bo = a.object.bo;
  r.res_id = a.object.res_id;
  r.offset = a.offset;
  r.va = a.va;
  r.size = a.size;
  r.flags = a.flags;
  return append<rvgl_req_va_map, rvgl_rsp_va_map>(RVGL_CMD_VA_MAP, r, reply);
}

Result<ResponseTicket> RequestEncoder::va_unmap(uint64_t va, uint64_t size, Reply reply) {
  rvgl_req_va_unmap r{};
  r.va = va;
  r.size = size;
  return append<rvgl_req_va_unmap, rvgl_rsp_va_unmap>(RVGL_CMD_VA_UNMAP, r, reply);
}

Result<ResponseTicket> RequestEncoder::queue_create(const KernelQueueArgs &a, Reply reply) {
  rvgl_req_queue_create r{};
  r.kind = RVGL_QUEUE_KIND_KERNEL;
  r.ip = a.ip;
  r.priority = a.priority;
  r.ring_idx = a.ring_idx;
  return append<rvgl_req_queue_create, rvgl_rsp_queue_create>(RVGL_CMD_QUEUE_CREATE, r, reply);
}

Result<ResponseTicket> RequestEncoder::queue_create(const UserQueueArgs &a, Reply reply) {
  rvgl_req_queue_create r{};
  r.kind = RVGL_QUEUE_KIND_USER;
  r.ip = a.ip;
  r.priority = a.priority;
  r.ring_idx = a.ring_idx;
  r.queue_va = a.queue_va;
  r.queue_size = a.queue_size;
  r.rptr_va = a.rptr_va;
  r.wptr_va = a.wptr_va;
  r.eop_va = a.eop_va;
  r.doorbell_bo = a.doorbell_bo;
  r.doorbell_offset = a.doorbell_offset;
  return append<rvgl_req_queue_create, rvgl_rsp_queue_create>(RVGL_CMD_QUEUE_CREATE, r, reply);
}

Result<ResponseTicket> RequestEncoder::queue_destroy(uint32_t queue, Reply reply) {
  rvgl_req_queue_destroy r{};
  r.queue = queue;
  return append<rvgl_req_queue_destroy, rvgl_rsp_queue_destroy>(RVGL_CMD_QUEUE_DESTROY, r, reply);
}

Result<ResponseTicket> RequestEncoder::submit(uint32_t queue, std::span<const rvgl_ib> ibs,
                                              std::span<const rvgl_wait> waits, Reply reply) {
  if (ibs.size() > std::numeric_limits<uint32_t>::max() ||
      waits.size() > std::numeric_limits<uint32_t>::max())
    return make_error(-E2BIG, "SUBMIT arrays too long");
  rvgl_req_submit r{};
  r.queue = queue;
  r.num_ibs = static_cast<uint32_t>(ibs.size());
  r.num_waits = static_cast<uint32_t>(waits.size());
  const std::span<const uint8_t> tails[] = {as_bytes_of(ibs), as_bytes_of(waits)};
  return append(RVGL_CMD_SUBMIT, &r, sizeof(r), sizeof(rvgl_rsp_submit), reply, tails);
}

Result<ResponseTicket> RequestEncoder::queue_state(uint32_t queue, Reply reply) {
  rvgl_req_queue_state r{};
  r.queue = queue;
  return append<rvgl_req_queue_state, rvgl_rsp_queue_state>(RVGL_CMD_QUEUE_STATE, r, reply);
}

Result<ResponseTicket> RequestEncoder::spm_acquire(uint32_t xcp, uint32_t ring_idx, Reply reply) {
  rvgl_req_spm_acquire r{};
  r.xcp = xcp;
  r.ring_idx = ring_idx;
  return append<rvgl_req_spm_acquire, rvgl_rsp_spm_acquire>(RVGL_CMD_SPM_ACQUIRE, r, reply);
}

Result<ResponseTicket> RequestEncoder::spm_release(uint32_t xcp, Reply reply) {
  rvgl_req_spm_release r{};
  r.xcp = xcp;
  return append<rvgl_req_spm_release, rvgl_rsp_spm_release>(RVGL_CMD_SPM_RELEASE, r, reply);
}

Result<ResponseTicket> RequestEncoder::spm_set_dest(const SpmSetDestArgs &a, Reply reply) {
  rvgl_req_spm_set_dest r{};
  r.xcp = a.xcp;
  r.bo = a.object.bo;
  r.res_id = a.object.res_id;
  r.timeout_ms = a.timeout_ms;
  r.offset = a.offset;
  r.size = a.size;
  return append<rvgl_req_spm_set_dest, rvgl_rsp_spm_set_dest>(RVGL_CMD_SPM_SET_DEST, r, reply);
}

}  // namespace rvgl::guest
