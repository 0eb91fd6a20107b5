#include "vtest_side.h"

#include <stdexcept>

#include "clock.h"

namespace rvgl::bench {

namespace {

constexpr uint32_t kSdmaRing = 1;
constexpr uint32_t kComputeRing = 2;

template <class T>
T value_or_throw(guest::Result<T> r, const char *what) {
  if (!r) throw std::runtime_error(std::string(what) + ": " + r.error().message);
  return std::move(*r);
}

void ok_or_throw(const guest::Status &s, const char *what) {
  if (!s) throw std::runtime_error(std::string(what) + ": " + s.error().message);
}

demo::GpuBuffer buffer(demo::ComputeClient &c, uint64_t size, uint32_t domain, uint32_t flags,
                       uint32_t va_flags) {
  auto b = value_or_throw(c.create_buffer(size, domain, flags), "create_buffer");
  ok_or_throw(c.map_gpu(b, va_flags), "map_gpu");
  return b;
}

}  // namespace

VtestSide::VtestSide(const std::string &socket_path) {
  demo::ClientOptions o;
  o.client_name = "rvgl-bench";
  client_ = value_or_throw(demo::ComputeClient::connect(socket_path, o), "connect");
  constexpr uint32_t rw = RVGL_VA_FLAG_READ | RVGL_VA_FLAG_WRITE;
  src_ = buffer(*client_, kCopyBufferSize, RVGL_DOMAIN_GTT, 0, rw);
  dst_ = buffer(*client_, kCopyBufferSize, RVGL_DOMAIN_VRAM, RVGL_BO_FLAG_CPU_ACCESS, rw);
  target_ = buffer(*client_, kTargetBufferSize, RVGL_DOMAIN_GTT, 0, rw);
  ib_ = buffer(*client_, kIbBufferSize, RVGL_DOMAIN_GTT, 0, rw | RVGL_VA_FLAG_EXECUTE);
  ibs_ = build_workload_ibs(src_.va, dst_.va, target_.va);
  std::memcpy(ib_.memory().data(), ibs_.image.data(), ibs_.image.size() * 4);
  sdma_ = value_or_throw(client_->create_queue(RVGL_IP_SDMA, kSdmaRing), "sdma queue");
  compute_ = value_or_throw(client_->create_queue(RVGL_IP_COMPUTE, kComputeRing), "compute queue");
}

guest::Fence VtestSide::send(uint32_t queue, uint32_t ring, const IbSlot &ib) {
  guest::RequestEncoder enc = client_->session().encoder();
  const rvgl_ib desc{ib_.va + ib.offset, ib.dwords * 4, 0};
  value_or_throw(enc.submit(queue, {&desc, 1}, {}, guest::Reply::kNone), "encode SUBMIT");
  guest::SubmitParams p;
  p.commands = enc.bytes();
  p.ring_idx = ring;
  p.want_fence = true;
  auto f = value_or_throw(client_->transport().submit(p), "SUBMIT_CMD2");
  enc.mark_submitted();
  return f;
}

RunTiming VtestSide::run(Engine e, const IbSlot &ib, uint32_t n) {
  const bool sdma = e == Engine::kSdma;
  const uint64_t t0 = now_ns();
  guest::Fence last;
  for (uint32_t i = 0; i < n; ++i)
    last = send(sdma ? sdma_ : compute_, sdma ? kSdmaRing : kComputeRing, ib);
  const uint64_t t1 = now_ns();
  if (!value_or_throw(client_->wait(last, std::chrono::seconds(2)), "wait")) {
    // A later fence on the same ring: if it arrives, the jobs were done and only the earlier
    // fence's notification went missing.
    auto again = value_or_throw(client_->fence(sdma ? kSdmaRing : kComputeRing), "fence");
    if (!value_or_throw(client_->wait(again, std::chrono::seconds(10)), "wait"))
      throw std::runtime_error("vtest: fence did not retire");
    ++stuck_;
  }
  return {now_ns() - t0, t1 - t0};
}

uint64_t VtestSide::clock_latency() {
  auto *clock = reinterpret_cast<volatile uint64_t *>(target_.memory().data() + kClockOffset);
  *clock = 0;
  guest::Fence f = send(compute_, kComputeRing, ibs_.clock);
  if (!value_or_throw(client_->wait(f, std::chrono::seconds(2)), "wait")) {
    auto again = value_or_throw(client_->fence(kComputeRing), "fence");
    if (!value_or_throw(client_->wait(again, std::chrono::seconds(10)), "wait"))
      throw std::runtime_error("vtest: fence did not retire");
    ++stuck_;
  }
  const uint64_t seen = now_ns();
  const uint64_t done = *clock * kGpuTickNs;
  if (!done || done > seen) throw std::runtime_error("vtest: no completion clock");
  return seen - done;
}

uint32_t VtestSide::async_errors() {
  return client_->session().shared_page().async_error();
}

}  // namespace rvgl::bench
