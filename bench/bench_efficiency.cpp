// Virtualization efficiency in one process: the same jobs straight through libdrm_amdgpu (a)
// and through our context via the virglrenderer API (b), repetitions alternating a/b and b/a
// so that drift and noise land on both. efficiency = a / b per job (1.0: no overhead).
//
// Two deliveries, as the VMMs use them: async callbacks (QEMU with ASYNC_FENCE_CB), where the
// completion engine's thread is woken and its callback wakes the VMM's waiting thread (two
// hand-offs where the direct side has one), and poll mode (vtest, QEMU without it), where the
// kernel wakes the VMM's thread itself through the context's poll fd.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "support/guarded.h"
#include "support/api_side.h"
#include "support/direct_side.h"
#include "support/side_sampler.h"
#include "support/stats.h"

namespace rvgl::bench {
namespace {

struct Case {
  Engine engine;
  int copy_index;  // -1: the WRITE_DATA batch
  uint32_t jobs_per_rep;
  VirglHost::Delivery delivery = VirglHost::Delivery::kAsync;
};

const IbSlot &slot_of(const GpuSide &s, const Case &c) {
  return c.copy_index < 0 ? s.ibs().write_data : s.ibs().copy[c.copy_index];
}

void run_interleaved(benchmark::State &state, const Case &c) {
  VirglHost host(c.delivery);
  DirectSide direct;
  ApiSide api(host, 1);
  GpuSide *sides[2] = {&direct, &api};
  // Warm-up: first-use costs (ring worker threads, page faults of the buffers) on both sides.
  for (GpuSide *s : sides)
    s->run(c.engine, slot_of(*s, c), c.jobs_per_rep);

  SideSamples samples[2];
  std::vector<double> ratio;
  uint64_t rep = 0;
  for (auto _ : state) {
    uint64_t wall = 0;
    const int first = static_cast<int>(rep++ % 2);
    for (int k = 0; k < 2; ++k) {
      const int i = (first + k) % 2;
      wall += samples[i].sample(*sides[i], c.engine, slot_of(*sides[i], c), c.jobs_per_rep);
    }
    ratio.push_back(samples[0].wall_ns.back() / samples[1].wall_ns.back());
    state.SetIterationTime(static_cast<double>(wall) * 1e-9);
  }
  const SideSamples &a = samples[0], &b = samples[1];
  state.counters["direct_ns_per_job"] = median(a.wall_ns);
  state.counters["virgl_ns_per_job"] = median(b.wall_ns);
  // Ratio of the medians (the figure quoted), and the median of per-repetition ratios (how
  // stable it is when both sides see the same moment of the machine).
  state.counters["efficiency"] = median(a.wall_ns) / median(b.wall_ns);
  state.counters["efficiency_paired_median"] = median(ratio);
  state.counters["efficiency_paired_p10"] = quantile(ratio, 0.1);
  // Where the difference goes: host CPU per job (all threads of this process: the emulated GPU,
  // our retire thread), the submit path alone, and ioctls into the emulated kernel.
  state.counters["direct_cpu_ns_per_job"] = median(a.cpu_ns);
  state.counters["virgl_cpu_ns_per_job"] = median(b.cpu_ns);
  state.counters["efficiency_cpu"] = median(a.cpu_ns) / median(b.cpu_ns);
  // The same CPU by thread: the emulated GPU's ring workers, our completion engine, and the rest
  // (the VMM's thread, which submits and waits). Omitted without schedstat.
  if (!a.by_thread.empty() && !b.by_thread.empty()) {
    a.by_thread.report(state, "direct_", "job", false);
    b.by_thread.report(state, "virgl_", "job", true);
  }
  state.counters["direct_issue_ns_per_job"] = median(a.issue_ns);
  state.counters["virgl_issue_ns_per_job"] = median(b.issue_ns);
  state.counters["direct_ioctls_per_job"] = median(a.ioctls);
  state.counters["virgl_ioctls_per_job"] = median(b.ioctls);
  state.counters["jobs_per_rep"] = c.jobs_per_rep;
  if (c.copy_index >= 0)
    state.counters["copy_bytes"] = static_cast<double>(kCopySizes[c.copy_index]);
}

void BM_EfficiencySdmaCopy(benchmark::State &state) {
  const auto idx = static_cast<int>(state.range(0));
  const uint32_t jobs = kCopySizes[idx] >= kMiB ? 16 : 64;
  run_interleaved(state, {Engine::kSdma, idx, jobs});
  state.SetLabel(std::to_string(kCopySizes[idx] / kKiB) + " KiB COPY_LINEAR");
}

void BM_EfficiencySdmaCopyPoll(benchmark::State &state) {
  const auto idx = static_cast<int>(state.range(0));
  run_interleaved(state, {Engine::kSdma, idx, 64, VirglHost::Delivery::kPoll});
  state.SetLabel(std::to_string(kCopySizes[idx] / kKiB) + " KiB COPY_LINEAR, poll mode");
}

void BM_EfficiencyWriteData(benchmark::State &state) {
  run_interleaved(state, {Engine::kCompute, -1, 64});
  state.SetLabel(std::to_string(kWriteDataPackets) + " x PM4 WRITE_DATA per IB");
}

}  // namespace

BENCHMARK(guarded<BM_EfficiencySdmaCopy>)
    ->Name("BM_EfficiencySdmaCopy")
    ->ArgName("size_index")
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Iterations(300)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(guarded<BM_EfficiencySdmaCopyPoll>)
    ->Name("BM_EfficiencySdmaCopyPoll")
    ->ArgName("size_index")
    ->Arg(1)  // 64 KiB, the size the target is quoted at
    ->Iterations(300)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(guarded<BM_EfficiencyWriteData>)
    ->Name("BM_EfficiencyWriteData")
    ->Iterations(300)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace rvgl::bench
