// The guest's view of the shared page (blob_id 0): the header the host maintains and the response
// area where the host writes responses.
//
// The host may write here at any time and is not trusted: every read is bounded by the page's
// size, responses are copied out before the caller looks at them, and a response counts as
// complete only when the seqno the host stores last (with release order) matches the request's.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "rocm_virgl_protocol.h"
#include "rvgl_request_encoder.h"
#include "rvgl_response_slots.h"
#include "rvgl_result.h"

namespace rvgl::guest {

// A completed response, copied out of the shared page.
struct Response {
  uint32_t cmd = 0;
  uint32_t seqno = 0;
  int32_t result = 0;  // 0 or a negative errno
  uint32_t size = 0;   // bytes valid in `bytes`
  alignas(8) std::array<uint8_t, RVGL_MAX_RSP_SIZE> bytes{};

  // The response as its rvgl_rsp_* struct; bytes past `size` read as zero.
  template <class T>
  T as() const {
    static_assert(sizeof(T) <= RVGL_MAX_RSP_SIZE);
    T v;
    std::memcpy(&v, bytes.data(), sizeof(T));
    return v;
  }
};

class SharedPage {
 public:
  SharedPage() = default;
  // Does not own the memory: it must stay mapped while the view is used.
  SharedPage(uint8_t *base, size_t size) : base_(base), size_(size) {}

  bool valid() const { return base_ != nullptr && size_ >= RVGL_SHMEM_SIZE; }
  uint8_t *base() const { return base_; }
  size_t size() const { return size_; }

  // Checks the self-description the host wrote when it created the page against this library's
  // layout, so a guest never walks a response area or event ring placed elsewhere.
  Status validate_layout() const;

  // Before a request goes out, stores a seqno in its slot that cannot match, so stale bytes left
  // by an earlier, differently placed response are never taken for this one's completion.
  void prepare(const ResponseTicket &t);

  bool arrived(const ResponseTicket &t) const;
  bool arrived(const ResponseSlot &s) const;
  // The response of `t`, which must have arrived (arrived(t)); the copy happens after the seqno
  // check, so it sees everything the host stored before the seqno.
  Result<Response> read(const ResponseTicket &t) const;

  uint32_t last_seqno() const;  // header.seqno: the last request the host processed
  uint32_t async_error() const;

 private:
  bool slot_in_area(uint32_t off, uint32_t size) const;
  bool seqno_at(uint32_t off, uint32_t seqno) const;
  uint32_t load_header_word(size_t offset) const;

  uint8_t *base_ = nullptr;
  size_t size_ = 0;
};

}  // namespace rvgl::guest
