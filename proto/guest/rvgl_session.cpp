#include "rvgl_session.h"

#include <cerrno>
#include <thread>

#include "rvgl_capset.h"
#include "rvgl_seqno.h"

namespace rvgl::guest {

using Clock = std::chrono::steady_clock;

Session::Session(std::unique_ptr<Transport> transport, const SessionOptions &options)
    : transport_(std::move(transport)), options_(options) {}

Session::~Session() {
  sequencer_.set_reclaimer(nullptr);
  if (transport_ && shmem_blob_.res_id) (void)transport_->unref_blob(std::move(shmem_blob_));
}

Result<std::unique_ptr<Session>> Session::open(std::unique_ptr<Transport> transport,
                                               const SessionOptions &options) {
  if (!transport) return make_error(-EINVAL, "session: no transport");
  std::unique_ptr<Session> s(new Session(std::move(transport), options));
  if (auto st = s->start(); !st) return st.error();
  return s;
}

Status Session::start() {
  auto bytes = transport_->get_capset(options_.capset_id, RVGL_CAPSET_VERSION);
  if (!bytes) return bytes.error();
  auto caps = parse_capset(*bytes);
  if (!caps) return caps.error();
  capset_ = *caps;

  if (auto s = transport_->init_context(options_.capset_id, options_.num_rings); !s) return s;

  // The shared page: blob_id 0, HOST3D, flags exactly MAPPABLE (PROTOCOL.md §3).
  BlobParams p;
  p.blob_mem = RVGL_BLOB_MEM_HOST3D;
  p.blob_flags = RVGL_BLOB_FLAG_USE_MAPPABLE;
  p.blob_id = RVGL_BLOB_ID_SHMEM;
  p.size = capset_.shmem_size;
  auto blob = transport_->create_blob(p);
  if (!blob) return blob.error();
  shmem_blob_ = std::move(*blob);
  if (auto s = transport_->map_blob(shmem_blob_); !s) return s;
  page_ = SharedPage(shmem_blob_.memory.data(), shmem_blob_.memory.size());
  if (auto s = page_.validate_layout(); !s) return s;
  events_ = EventRingReader(page_.base());
  sequencer_.set_reclaimer(this);
  return {};
}

Status Session::submit(RequestEncoder &enc) {
  if (enc.submitted()) return make_error(-EALREADY, "session: encoder already submitted");
  if (enc.empty()) return {};
  if (enc.size() > capset_.max_submit_bytes)
    return make_error(-E2BIG, "session: " + std::to_string(enc.size()) +
                                  " bytes, the host takes at most " +
                                  std::to_string(capset_.max_submit_bytes) + " per submit");
  if (!seqno_after(enc.first_seqno(), last_submitted_))
    return make_error(-EINVAL, "session: encoders must be submitted in the order they were made");
  for (const auto &t : enc.tickets())
    page_.prepare(t);
  forget_processed_fences();

  SubmitParams sp;
  sp.commands = enc.bytes();
  sp.ring_idx = RVGL_RING_CPU;
  sp.want_fence = true;
  auto fence = transport_->submit(sp);
  if (!fence) return fence.error();
  enc.mark_submitted();
  last_submitted_ = enc.last_seqno();
  in_flight_.push_back({enc.last_seqno(), std::move(*fence)});
  return {};
}

void Session::forget_processed_fences() {
  // Ring 0 fences retire once the host processed their buffer; the host says how far it got.
  const uint32_t done = page_.last_seqno();
  while (!in_flight_.empty() && !seqno_after(in_flight_.front().last_seqno, done))
    in_flight_.pop_front();
}

Result<Response> Session::take(const ResponseTicket &t) {
  if (auto it = unclaimed_.find(t.seqno); it != unclaimed_.end()) {
    Response r = it->second;
    unclaimed_.erase(it);
    r.cmd = t.cmd;
    return r;
  }
  if (!page_.arrived(t)) return make_error(-EAGAIN, "response has not arrived");
  auto r = page_.read(t);
  if (r) sequencer_.slots().release(t.rsp_off, t.seqno);
  return r;
}

size_t Session::reclaim(ResponseSlotAllocator &slots) {
  auto arrived = [&](const ResponseSlot &s) {
    const ResponseTicket t{0, s.seqno, s.offset, s.size};
    auto r = page_.read(t);
    if (!r) return false;
    // Keep it for whoever holds the ticket: the slot is about to be reused.
    if (unclaimed_.size() >= options_.max_unclaimed_responses) unclaimed_.erase(unclaimed_.begin());
    unclaimed_[s.seqno] = *r;
    return true;
  };
  size_t n = slots.release_if(arrived);
  // Nothing back yet: the host may simply not have got to the oldest buffers. Wait for them one
  // by one (bounded by the session timeout) until something frees up.
  while (n == 0 && !in_flight_.empty()) {
    auto w = transport_->wait(in_flight_.front().fence, options_.timeout);
    if (!w || !*w) break;
    in_flight_.pop_front();
    n = slots.release_if(arrived);
  }
  return n;
}

Result<Response> Session::wait(const ResponseTicket &t) {
  return wait(t, options_.timeout);
}

Result<Response> Session::wait(const ResponseTicket &t, std::chrono::milliseconds timeout) {
  if (!t.has_response()) return make_error(-EINVAL, "session: the request asked for no response");
  if (auto r = take(t); r || r.code() != -EAGAIN) return r;
  if (seqno_after(t.seqno, last_submitted_))
    return make_error(-EINVAL, "session: the request was not submitted");

  const bool forever = timeout == kWaitForever;
  const auto until = forever ? Clock::time_point::max() : Clock::now() + timeout;
  auto left = [&] {
    if (forever) return kWaitForever;
    const auto l = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
    return l.count() < 0 ? std::chrono::milliseconds(0) : l;
  };

  // The fence of the buffer that carried the request: once it retires the host has processed it.
  for (size_t i = 0; i < in_flight_.size(); ++i) {
    const InFlight &f = in_flight_[i];
    if (seqno_after(t.seqno, f.last_seqno)) continue;
    auto w = transport_->wait(f.fence, left());
    if (!w) return w.error();
    if (!*w) return make_error(-ETIMEDOUT, "session: the host did not process the request");
    // Ring 0 fences retire in order: every earlier buffer is processed too.
    in_flight_.erase(in_flight_.begin(), in_flight_.begin() + static_cast<long>(i) + 1);
    break;
  }

  // Processed; a response the host writes later (SPM_SET_DEST) still has to land.
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    if (auto r = take(t); r || r.code() != -EAGAIN) return r;
    if (!forever && Clock::now() >= until)
      return make_error(-ETIMEDOUT, "session: no response within the timeout");
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::milliseconds(2)) pause *= 2;
  }
}

Result<std::vector<Response>> Session::execute(RequestEncoder &enc) {
  if (auto s = submit(enc); !s) return s.error();
  std::vector<Response> out;
  for (const auto &t : enc.tickets()) {
    if (!t.has_response()) continue;
    auto r = wait(t);
    if (!r) return r.error();
    out.push_back(*r);
  }
  return out;
}

Result<bool> Session::wait_for_event(std::chrono::milliseconds timeout) {
  if (events_.pending() > 0) return true;
  SubmitParams sp;
  sp.ring_idx = RVGL_RING_EVENTS;
  sp.want_fence = true;
  auto fence = transport_->submit(sp);
  if (!fence) return fence.error();
  auto w = transport_->wait(*fence, timeout);
  if (!w) return w.error();
  return *w && events_.pending() > 0;
}

}  // namespace rvgl::guest
