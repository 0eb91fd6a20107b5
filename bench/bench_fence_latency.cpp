// Fence retire latency: from the job's completion (the GPU clock its last packet wrote; the
// emulator's clock is CLOCK_MONOTONIC / 10 ns) to write_context_fence in our path, against the
// return of amdgpu_cs_wait_fences on the same kind of job straight through libdrm. Samples
// alternate between the two paths. Two deliveries: async callbacks (from the completion engine's
// thread) and poll mode (the waiting thread itself calls virgl_renderer_context_poll when the
// context's poll fd, which the kernel signals directly, turns readable).
#include <benchmark/benchmark.h>

#include <vector>

#include "support/guarded.h"
#include "support/api_side.h"
#include "support/clock.h"
#include "support/direct_side.h"
#include "support/stats.h"

namespace rvgl::bench {
namespace {

void BM_FenceRetireLatency(benchmark::State &state) {
  VirglHost host(state.range(0) ? VirglHost::Delivery::kPoll : VirglHost::Delivery::kAsync);
  state.SetLabel(state.range(0) ? "poll" : "async");
  DirectSide direct;
  ApiSide api(host, 2);
  for (int i = 0; i < 10; ++i)
    direct.clock_latency(), api.clock_latency();
  std::vector<double> direct_ns, virgl_ns;
  for (auto _ : state) {
    const uint64_t t0 = now_ns();
    direct_ns.push_back(static_cast<double>(direct.clock_latency()));
    virgl_ns.push_back(static_cast<double>(api.clock_latency()));
    state.SetIterationTime(static_cast<double>(now_ns() - t0) * 1e-9);
  }
  state.counters["direct_wait_median_ns"] = median(direct_ns);
  state.counters["direct_wait_p99_ns"] = quantile(direct_ns, 0.99);
  state.counters["virgl_callback_median_ns"] = median(virgl_ns);
  state.counters["virgl_callback_p99_ns"] = quantile(virgl_ns, 0.99);
  state.counters["ratio_median"] = median(virgl_ns) / median(direct_ns);
  state.counters["ratio_p99"] = quantile(virgl_ns, 0.99) / quantile(direct_ns, 0.99);
}

}  // namespace

BENCHMARK(guarded<BM_FenceRetireLatency>)
    ->Name("BM_FenceRetireLatency")
    ->ArgName("poll")
    ->Arg(0)
    ->Arg(1)
    ->Iterations(3000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace rvgl::bench
