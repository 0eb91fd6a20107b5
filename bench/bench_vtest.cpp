// The efficiency and fence-latency comparisons over vtest: (a) straight through libdrm_amdgpu in
// this process, (b) the stock virgl_test_server (emulator + our library preloaded, one server
// process) driven through the guest library's vtest transport. Reported apart from the
// in-process figures: every vtest job crosses a socket twice and a process boundary.
//
// The server and libraries come from RVGL_E2E_SERVER / RVGL_E2E_PRELOAD (scripts/bench.sh sets
// them), as for the end-to-end tests.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "support/guarded.h"
#include "support/clock.h"
#include "support/direct_side.h"
#include "support/side_sampler.h"
#include "support/stats.h"
#include "support/vtest_side.h"
#include "vtest_server.h"

namespace rvgl::bench {
namespace {

struct VtestWorld {
  e2e::VtestServer server;
  VtestSide side;
  VtestWorld() : server(options()), side(server.socket_path()) {}
  static e2e::ServerOptions options() {
    e2e::ServerOptions o;
    o.one_process = true;
    o.extra_env = {"RVGL_EMU_TRACE=0", "RVGL_EMU_JOB_LATENCY_US=0"};
    return o;
  }
};

std::unique_ptr<VtestWorld> start_or_skip(benchmark::State &state) {
  std::string why;
  if (!e2e::e2e_configured(&why)) {
    state.SkipWithError(why.c_str());
    return nullptr;
  }
  return std::make_unique<VtestWorld>();
}

void BM_VtestEfficiency(benchmark::State &state) {
  auto world = start_or_skip(state);
  if (!world) return;
  DirectSide direct;
  GpuSide *sides[2] = {&direct, &world->side};
  const int idx = static_cast<int>(state.range(0));
  const Engine engine = idx < 3 ? Engine::kSdma : Engine::kCompute;
  const uint32_t jobs = idx == 2 ? 16 : 64;
  auto slot = [&](GpuSide &s) -> const IbSlot & {
    return idx < 3 ? s.ibs().copy[idx] : s.ibs().write_data;
  };
  for (GpuSide *s : sides)
    s->run(engine, slot(*s), jobs);
  SideSamples samples[2];
  uint64_t rep = 0;
  for (auto _ : state) {
    uint64_t wall = 0;
    const int first = static_cast<int>(rep++ % 2);
    for (int k = 0; k < 2; ++k) {
      const int i = (first + k) % 2;
      wall += samples[i].sample(*sides[i], engine, slot(*sides[i]), jobs);
    }
    state.SetIterationTime(static_cast<double>(wall) * 1e-9);
  }
  const SideSamples &a = samples[0], &b = samples[1];
  if (world->side.async_errors()) state.SkipWithError("the host refused a SUBMIT");
  state.SetLabel(idx < 3 ? std::to_string(kCopySizes[idx] / kKiB) + " KiB COPY_LINEAR"
                         : std::to_string(kWriteDataPackets) + " x PM4 WRITE_DATA per IB");
  state.counters["direct_ns_per_job"] = median(a.wall_ns);
  state.counters["vtest_ns_per_job"] = median(b.wall_ns);
  state.counters["efficiency"] = median(a.wall_ns) / median(b.wall_ns);
  state.counters["direct_issue_ns_per_job"] = median(a.issue_ns);
  state.counters["vtest_issue_ns_per_job"] = median(b.issue_ns);
  state.counters["jobs_per_rep"] = jobs;
  state.counters["vtest_fences_stuck"] = world->side.stuck_fences();
}

void BM_VtestFenceLatency(benchmark::State &state) {
  auto world = start_or_skip(state);
  if (!world) return;
  DirectSide direct;
  for (int i = 0; i < 10; ++i)
    direct.clock_latency(), world->side.clock_latency();
  std::vector<double> direct_ns, vtest_ns;
  for (auto _ : state) {
    const uint64_t t0 = now_ns();
    direct_ns.push_back(static_cast<double>(direct.clock_latency()));
    vtest_ns.push_back(static_cast<double>(world->side.clock_latency()));
    state.SetIterationTime(static_cast<double>(now_ns() - t0) * 1e-9);
  }
  state.counters["direct_wait_median_ns"] = median(direct_ns);
  state.counters["direct_wait_p99_ns"] = quantile(direct_ns, 0.99);
  state.counters["vtest_wait_median_ns"] = median(vtest_ns);
  state.counters["vtest_wait_p99_ns"] = quantile(vtest_ns, 0.99);
  state.counters["ratio_median"] = median(vtest_ns) / median(direct_ns);
  state.counters["vtest_fences_stuck"] = world->side.stuck_fences();
}

}  // namespace

BENCHMARK(guarded<BM_VtestEfficiency>)
    ->Name("BM_VtestEfficiency")
    ->ArgName("workload")
    ->DenseRange(0, 3)
    ->Iterations(100)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(guarded<BM_VtestFenceLatency>)
    ->Name("BM_VtestFenceLatency")
    ->Iterations(500)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace rvgl::bench
