// The workload through our context via the virglrenderer API in this process: SUBMIT requests by
// virgl_renderer_submit_cmd, a context fence per submission, the write_context_fence callback.
#pragma once

#include "api_guest.h"
#include "gpu_side.h"
#include "virgl_host.h"

namespace rvgl::bench {

class ApiSide : public GpuSide {
 public:
  // ctx_id must be unused in `host`; resource ids come from [ctx_id * 1000, ...).
  ApiSide(VirglHost &host, uint32_t ctx_id);
  const WorkloadIbs &ibs() const override { return ibs_; }
  RunTiming run(Engine e, const IbSlot &ib, uint32_t n) override;
  uint64_t clock_latency() override;

  static constexpr uint32_t kSdmaRing = 1;
  static constexpr uint32_t kComputeRing = 2;

 private:
  VirglHost &host_;
  ApiGuest guest_;
  ApiBuffer src_, dst_, target_, ib_;
  WorkloadIbs ibs_;
  uint32_t sdma_ = 0, compute_ = 0;
  uint64_t fence_id_ = 0;
};

}  // namespace rvgl::bench
