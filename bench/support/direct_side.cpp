#include "direct_side.h"

#include <stdexcept>

#include "clock.h"

namespace rvgl::bench {

namespace {

uint32_t ip_of(Engine e) {
  return e == Engine::kSdma ? AMDGPU_HW_IP_DMA : AMDGPU_HW_IP_COMPUTE;
}

}  // namespace

DirectSide::DirectSide()
    : src_(gpu_.buffer(kCopyBufferSize, AMDGPU_GEM_DOMAIN_GTT)),
      dst_(gpu_.buffer(kCopyBufferSize, AMDGPU_GEM_DOMAIN_VRAM)),
      target_(gpu_.buffer(kTargetBufferSize, AMDGPU_GEM_DOMAIN_GTT, true)),
      ib_(gpu_.buffer(kIbBufferSize, AMDGPU_GEM_DOMAIN_GTT, true)),
      ibs_(build_workload_ibs(src_->va(), dst_->va(), target_->va())) {
  std::memcpy(ib_->cpu(), ibs_.image.data(), ibs_.image.size() * 4);
}

RunTiming DirectSide::run(Engine e, const IbSlot &ib, uint32_t n) {
  const uint32_t ip = ip_of(e);
  seqs_.clear();
  const uint64_t t0 = now_ns();
  for (uint32_t i = 0; i < n; ++i)
    seqs_.push_back(gpu_.submit(ip, ib_->va() + ib.offset, ib.dwords));
  const uint64_t t1 = now_ns();
  gpu_.wait_all(ip, seqs_);
  return {now_ns() - t0, t1 - t0};
}

uint64_t DirectSide::clock_latency() {
  auto *clock = static_cast<volatile uint64_t *>(
      static_cast<void *>(static_cast<uint8_t *>(target_->cpu()) + kClockOffset));
  *clock = 0;
  const uint64_t seq =
      gpu_.submit(AMDGPU_HW_IP_COMPUTE, ib_->va() + ibs_.clock.offset, ibs_.clock.dwords);
  gpu_.wait(AMDGPU_HW_IP_COMPUTE, seq);
  const uint64_t seen = now_ns();
  const uint64_t done = *clock * kGpuTickNs;
  if (!done || done > seen) throw std::runtime_error("direct: no completion clock");
  return seen - done;
}

}  // namespace rvgl::bench
