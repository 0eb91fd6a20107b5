// The workload through our context over the vtest socket: the stock virgl_test_server with the
// emulated GPU and our library preloaded, the guest library's vtest transport as the client.
// Each job is one SUBMIT_CMD2 carrying the SUBMIT request (no response wanted) and a fence on the
// queue's ring, as a guest driver would send one EXECBUFFER with an out-fence.
#pragma once

#include <memory>
#include <string>

#include "compute_client.h"
#include "gpu_side.h"

namespace rvgl::bench {

class VtestSide : public GpuSide {
 public:
  explicit VtestSide(const std::string &socket_path);  // throws when the setup fails
  const WorkloadIbs &ibs() const override { return ibs_; }
  RunTiming run(Engine e, const IbSlot &ib, uint32_t n) override;
  uint64_t clock_latency() override;  // ns from completion to the client's wait returning

  // Requests the host refused since the start (responses were not asked for).
  uint32_t async_errors();
  // Runs whose last fence had not signalled after 2 s, although a fence sent after it did: the
  // notification was lost on the way (the run is counted with its 2 s, so it shows in the tail).
  uint32_t stuck_fences() const { return stuck_; }

 private:
  guest::Fence send(uint32_t queue, uint32_t ring, const IbSlot &ib);

  std::unique_ptr<demo::ComputeClient> client_;
  demo::GpuBuffer src_, dst_, target_, ib_;
  WorkloadIbs ibs_;
  uint32_t sdma_ = 0, compute_ = 0;
  uint32_t stuck_ = 0;
};

}  // namespace rvgl::bench
