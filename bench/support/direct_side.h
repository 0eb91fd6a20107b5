// The workload straight through libdrm_amdgpu: the reference every efficiency figure divides by.
#pragma once

#include <memory>
#include <vector>

#include "direct_gpu.h"
#include "gpu_side.h"

namespace rvgl::bench {

class DirectSide : public GpuSide {
 public:
  DirectSide();
  const WorkloadIbs &ibs() const override { return ibs_; }
  RunTiming run(Engine e, const IbSlot &ib, uint32_t n) override;
  uint64_t clock_latency() override;

 private:
  DirectGpu gpu_;
  std::unique_ptr<DirectBuffer> src_, dst_, target_, ib_;
  WorkloadIbs ibs_;
  std::vector<uint64_t> seqs_;
};

}  // namespace rvgl::bench
