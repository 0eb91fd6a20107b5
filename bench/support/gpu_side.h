// One way of reaching the GPU, running the shared workload (workload_ibs.h). The comparisons
// alternate two sides in one process so that noise hits both alike.
#pragma once

#include <cstdint>

#include "workload_ibs.h"

namespace rvgl::bench {

enum class Engine { kSdma, kCompute };

struct RunTiming {
  uint64_t total_ns = 0;  // first submit to the last fence seen
  uint64_t issue_ns = 0;  // first submit to the last submit call returning (host CPU path)
};

class GpuSide {
 public:
  virtual ~GpuSide() = default;
  virtual const WorkloadIbs &ibs() const = 0;
  // Submits the IB `n` times, each followed by a fence, and waits for the last fence (all of
  // them: fences of one ring retire in order).
  virtual RunTiming run(Engine e, const IbSlot &ib, uint32_t n) = 0;
  // Runs the clock IB once: ns from the job's completion (the GPU clock it wrote) to the moment
  // this side learnt of it (fence callback, or the wait's return).
  virtual uint64_t clock_latency() = 0;
};

}  // namespace rvgl::bench
