// A guest's connection to one rocm-virgl context: the capset checked, the context created, the
// shared page mapped, and requests sent and their responses collected.
//
// Requests go out on ring 0 (RVGL_RING_CPU) with a fence, which retires once the host has
// processed them; a response is complete when its slot carries the request's seqno. Responses
// the host writes later (SPM_SET_DEST) are found by polling the slot after the fence.
//
// Not thread-safe: one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "rocm_virgl_protocol.h"
#include "rvgl_event_ring.h"
#include "rvgl_request_encoder.h"
#include "rvgl_result.h"
#include "rvgl_shared_page.h"
#include "rvgl_transport.h"

namespace rvgl::guest {

struct SessionOptions {
  uint32_t capset_id = RVGL_CAPSET_ID;  // hosts may be configured to answer on another id
  uint32_t num_rings = RVGL_RING_COUNT;
  std::chrono::milliseconds timeout{10000};  // default bound for wait()
  // Responses collected while reclaiming slots, kept until their ticket is waited for.
  size_t max_unclaimed_responses = 4096;
};

class Session : private RequestSequencer::Reclaimer {
 public:
  // Fetches and checks the capset, creates the context, creates and maps the shared page.
  static Result<std::unique_ptr<Session>> open(std::unique_ptr<Transport> transport,
                                               const SessionOptions &options = {});
  ~Session() override;
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  const rvgl_capset &capset() const { return capset_; }
  Transport &transport() { return *transport_; }
  SharedPage &shared_page() { return page_; }
  EventRingReader &events() { return events_; }
  uint32_t last_submitted_seqno() const { return last_submitted_; }

  // An encoder numbering requests and placing responses for this context. When the response area
  // is full of responses still to come, appending a request waits for the oldest submitted
  // buffers to be processed (up to options().timeout) before it gives up with -ENOSPC.
  RequestEncoder encoder() { return RequestEncoder(sequencer_); }

  // Sends the encoder's requests. Encoders must be submitted in the order they were created.
  Status submit(RequestEncoder &enc);

  // The response of one submitted request; -ETIMEDOUT when it did not come within `timeout`
  // (options().timeout by default). The response's slot is free for reuse afterwards.
  Result<Response> wait(const ResponseTicket &ticket);
  Result<Response> wait(const ResponseTicket &ticket, std::chrono::milliseconds timeout);

  // submit() and wait() for every request of the encoder, in ticket order.
  Result<std::vector<Response>> execute(RequestEncoder &enc);

  // One request, encoded by `encode(RequestEncoder&) -> Result<ResponseTicket>`, sent and waited
  // for; a non-zero result becomes the error. Rsp is the command's rvgl_rsp_* struct.
  template <class Rsp, class F>
  Result<Rsp> call(F &&encode) {
    RequestEncoder enc = encoder();
    Result<ResponseTicket> t = encode(enc);
    if (!t) return t.error();
    if (auto s = submit(enc); !s) return s.error();
    auto r = wait(*t);
    if (!r) return r.error();
    if (r->result != 0)
      return make_error(r->result, "request " + std::to_string(t->cmd) + " failed on the host");
    return r->template as<Rsp>();
  }

  // Sleeps until an event record is unread or `timeout` passes (a fence on RVGL_RING_EVENTS);
  // true when there is one.
  Result<bool> wait_for_event(std::chrono::milliseconds timeout);

  const SessionOptions &options() const { return options_; }

 private:
  struct InFlight {
    uint32_t last_seqno;  // of the buffer this fence follows
    Fence fence;
  };

  Session(std::unique_ptr<Transport> transport, const SessionOptions &options);
  Status start();
  size_t reclaim(ResponseSlotAllocator &slots) override;
  void forget_processed_fences();
  Result<Response> take(const ResponseTicket &t);

  std::unique_ptr<Transport> transport_;
  SessionOptions options_;
  rvgl_capset capset_{};
  Blob shmem_blob_;
  SharedPage page_;
  EventRingReader events_;
  RequestSequencer sequencer_;
  uint32_t last_submitted_ = 0;
  std::deque<InFlight> in_flight_;
  std::map<uint32_t, Response> unclaimed_;  // by seqno
};

}  // namespace rvgl::guest
