// Typed encoders for every v1 request.
//
// A RequestEncoder appends framed requests ({cmd, len, seqno, rsp_off} + body) to one command
// buffer. Seqnos come from the context's counter and response slots from its allocator, both held
// by a RequestSequencer that outlives the encoders, so several command buffers can be built and
// submitted one after the other. Submit buffers in the order their encoders were created: the host
// refuses a seqno that does not follow the previous one.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "rocm_virgl_protocol.h"
#include "rvgl_response_slots.h"
#include "rvgl_result.h"
#include "rvgl_seqno.h"

namespace rvgl::guest {

// What a caller keeps to find a request's response later.
struct ResponseTicket {
  uint32_t cmd = 0;
  uint32_t seqno = 0;
  uint32_t rsp_off = RVGL_RSP_NONE;  // into the response area, or RVGL_RSP_NONE
  uint32_t rsp_size = 0;             // bytes of the v1 response (0 without a slot)

  bool has_response() const { return rsp_off != RVGL_RSP_NONE; }
};

// The per-context numbering and slot state shared by all encoders of a context.
class RequestSequencer {
 public:
  // Called when the response area is full, to release slots whose responses have arrived. Returns
  // how many it released; the encoder calls it again while that is not 0 and there is still no
  // room (what it released may lie behind the oldest slot still in flight).
  class Reclaimer {
   public:
    virtual ~Reclaimer() = default;
    virtual size_t reclaim(ResponseSlotAllocator &slots) = 0;
  };

  explicit RequestSequencer(uint32_t rsp_area_size = RVGL_RSP_AREA_SIZE, uint32_t last_seqno = 0)
      : slots_(rsp_area_size), seqnos_(last_seqno) {}

  ResponseSlotAllocator &slots() { return slots_; }
  const ResponseSlotAllocator &slots() const { return slots_; }
  SeqnoCounter &seqnos() { return seqnos_; }
  void set_reclaimer(Reclaimer *r) { reclaimer_ = r; }
  Reclaimer *reclaimer() const { return reclaimer_; }

 private:
  ResponseSlotAllocator slots_;
  SeqnoCounter seqnos_;
  Reclaimer *reclaimer_ = nullptr;
};

// Whether a request asks for a response slot. Without one the host writes nothing; a failure only
// bumps the shared page's async_error counter.
enum class Reply { kWanted, kNone };

struct BoCreateArgs {
  uint64_t size = 0;
  uint64_t alignment = 0;
  uint32_t domain = RVGL_DOMAIN_GTT;
  uint32_t flags = 0;
  uint64_t blob_id = 0;
};

// An object named by handle xor resource id (VA_MAP, SPM_SET_DEST).
struct ObjectRef {
  uint32_t bo = 0;
  uint32_t res_id = 0;
  static ObjectRef handle(uint32_t bo) { return {bo, 0}; }
  static ObjectRef resource(uint32_t res_id) { return {0, res_id}; }
};

struct VaMapArgs {
  ObjectRef object;
  uint64_t offset = 0;
  uint64_t va = 0;
  uint64_t size = 0;
  uint32_t flags = RVGL_VA_FLAG_READ;
};

struct KernelQueueArgs {
  uint32_t ip = RVGL_IP_COMPUTE;
  uint32_t priority = RVGL_PRIORITY_NORMAL;
  uint32_t ring_idx = RVGL_RING_FIRST_QUEUE;
};

struct UserQueueArgs {
  uint32_t ip = RVGL_IP_COMPUTE;
  uint32_t priority = RVGL_PRIORITY_NORMAL;
  uint32_t ring_idx = RVGL_RING_FIRST_QUEUE;
  uint64_t queue_va = 0;
  uint64_t queue_size = 0;
  uint64_t rptr_va = 0;
  uint64_t wptr_va = 0;
  uint64_t eop_va = 0;
  uint32_t doorbell_bo = 0;
  uint32_t doorbell_offset = 0;
};

struct SpmSetDestArgs {
  uint32_t xcp = 0;
  ObjectRef object;
  uint32_t timeout_ms = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};

class RequestEncoder {
 public:
  explicit RequestEncoder(RequestSequencer &seq) : seq_(&seq) {}
  // Releases the slots of requests that were never submitted.
  ~RequestEncoder();
  RequestEncoder(RequestEncoder &&o) noexcept;
  RequestEncoder &operator=(RequestEncoder &&) = delete;
  RequestEncoder(const RequestEncoder &) = delete;
  RequestEncoder &operator=(const RequestEncoder &) = delete;

  // Each returns the request's ticket, or an error when no response slot is free (-ENOSPC) or the
  // request would not fit a 32-bit length (-E2BIG). On error nothing is appended.
  Result<ResponseTicket> nop(Reply reply = Reply::kWanted);
  Result<ResponseTicket> query_info(uint32_t query, Reply reply = Reply::kWanted);
  Result<ResponseTicket> bo_create(const BoCreateArgs &args, Reply reply = Reply::kWanted);
  Result<ResponseTicket> bo_free(uint32_t bo, Reply reply = Reply::kWanted);
  Result<ResponseTicket> va_map(const VaMapArgs &args, Reply reply = Reply::kWanted);
  Result<ResponseTicket> va_unmap(uint64_t va, uint64_t size, Reply reply = Reply::kWanted);
  Result<ResponseTicket> queue_create(const KernelQueueArgs &args, Reply reply = Reply::kWanted);
  Result<ResponseTicket> queue_create(const UserQueueArgs &args, Reply reply = Reply::kWanted);
  Result<ResponseTicket> queue_destroy(uint32_t queue, Reply reply = Reply::kWanted);
  Result<ResponseTicket> submit(uint32_t queue, std::span<const rvgl_ib> ibs,
                                std::span<const rvgl_wait> waits = {},
                                Reply reply = Reply::kWanted);
  Result<ResponseTicket> queue_state(uint32_t queue, Reply reply = Reply::kWanted);
  Result<ResponseTicket> spm_acquire(uint32_t xcp, uint32_t ring_idx, Reply reply = Reply::kWanted);
  Result<ResponseTicket> spm_release(uint32_t xcp, Reply reply = Reply::kWanted);
  Result<ResponseTicket> spm_set_dest(const SpmSetDestArgs &args, Reply reply = Reply::kWanted);

  // The command buffer: a whole number of requests, each a multiple of 8 bytes.
  std::span<const uint8_t> bytes() const { return buf_; }
  size_t size() const { return buf_.size(); }
  bool empty() const { return buf_.empty(); }
  const std::vector<ResponseTicket> &tickets() const { return tickets_; }
  uint32_t first_seqno() const { return first_seqno_; }
  uint32_t last_seqno() const { return last_seqno_; }

  // The buffer went to the host: its slots now belong to requests in flight, released as their
  // responses arrive (ResponseSlotAllocator::release), not when this encoder goes away.
  void mark_submitted() { submitted_ = true; }
  bool submitted() const { return submitted_; }

 private:
  // Appends a request struct (its header is filled in here) and optional trailing arrays.
  Result<ResponseTicket> append(uint32_t cmd, const void *req, size_t req_size, uint32_t rsp_size,
                                Reply reply, std::span<const std::span<const uint8_t>> tails = {});
  template <class Req, class Rsp>
  Result<ResponseTicket> append(uint32_t cmd, const Req &req, Reply reply) {
    static_assert(sizeof(Req) % RVGL_ALIGNMENT == 0 && sizeof(Rsp) % RVGL_ALIGNMENT == 0);
    static_assert(sizeof(Rsp) <= RVGL_MAX_RSP_SIZE);
    return append(cmd, &req, sizeof(Req), sizeof(Rsp), reply);
  }

  RequestSequencer *seq_;
  std::vector<uint8_t> buf_;
  std::vector<ResponseTicket> tickets_;
  uint32_t first_seqno_ = 0;
  uint32_t last_seqno_ = 0;
  bool submitted_ = false;
};

}  // namespace rvgl::guest
