#include "api_side.h"

#include <stdexcept>

#include "clock.h"

namespace rvgl::bench {

namespace {

ApiGuest &started(ApiGuest &g) {
  g.start();
  return g;
}

}  // namespace

ApiSide::ApiSide(VirglHost &host, uint32_t ctx_id)
    : host_(host),
      guest_(ctx_id, ctx_id * 1000),
      src_(started(guest_).gpu_bo(kCopyBufferSize, RVGL_DOMAIN_GTT)),
      dst_(guest_.gpu_bo(kCopyBufferSize, RVGL_DOMAIN_VRAM)),
      target_(guest_.mapped_bo(kTargetBufferSize, RVGL_DOMAIN_GTT)),
      ib_(guest_.mapped_bo(kIbBufferSize, RVGL_DOMAIN_GTT)),
      ibs_(build_workload_ibs(src_.va, dst_.va, target_.va)) {
  std::memcpy(ib_.cpu, ibs_.image.data(), ibs_.image.size() * 4);
  sdma_ = guest_.queue_create(RVGL_IP_SDMA, kSdmaRing);
  compute_ = guest_.queue_create(RVGL_IP_COMPUTE, kComputeRing);
}

RunTiming ApiSide::run(Engine e, const IbSlot &ib, uint32_t n) {
  const bool sdma = e == Engine::kSdma;
  const uint32_t queue = sdma ? sdma_ : compute_;
  const uint32_t ring = sdma ? kSdmaRing : kComputeRing;
  const uint64_t t0 = now_ns();
  for (uint32_t i = 0; i < n; ++i) {
    guest_.submit(queue, ib_.va + ib.offset, ib.dwords);
    guest_.fence(ring, ++fence_id_);
  }
  const uint64_t t1 = now_ns();
  if (!host_.wait_fence(guest_.ctx_id(), ring, fence_id_))
    throw std::runtime_error("api: fence did not retire");
  return {now_ns() - t0, t1 - t0};
}

uint64_t ApiSide::clock_latency() {
  auto *clock = reinterpret_cast<volatile uint64_t *>(target_.cpu + kClockOffset);
  *clock = 0;
  guest_.submit(compute_, ib_.va + ibs_.clock.offset, ibs_.clock.dwords);
  guest_.fence(kComputeRing, ++fence_id_);
  if (!host_.wait_fence(guest_.ctx_id(), kComputeRing, fence_id_))
    throw std::runtime_error("api: fence did not retire");
  const uint64_t seen = host_.last_fence_ns(guest_.ctx_id(), kComputeRing);
  const uint64_t done = *clock * kGpuTickNs;
  if (!done || done > seen) throw std::runtime_error("api: no completion clock");
  return seen - done;
}

}  // namespace rvgl::bench
