// Dispatch cost in time: one command buffer of N small requests through the context core
// (frame checks, table lookup, handler, response into the shared page). Only submit_cmd is
// timed; renumbering the batch between runs (the guest's work) is not.
#include <benchmark/benchmark.h>

#include <time.h>

#include <chrono>

#include "support/core_stream.h"

namespace rvgl::bench {
namespace {

double thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

void BM_Dispatch(benchmark::State &state) {
  const auto kind = static_cast<SmallRequest>(state.range(0));
  const auto n = static_cast<uint32_t>(state.range(1));
  CoreContext core;
  core.build(kind, n);
  double total_ns = 0;
  // Thread CPU time of the whole loop as well: wall time on a loaded shared machine includes
  // time this thread was not running at all. (The loop's renumbering is a store per request.)
  const double cpu0 = thread_cpu_ns();
  for (auto _ : state) {
    core.renumber();
    const auto t0 = std::chrono::steady_clock::now();
    const int r = core.submit();
    const auto t1 = std::chrono::steady_clock::now();
    if (r) {
      state.SkipWithError("submit_cmd failed");
      break;
    }
    const double sec = std::chrono::duration<double>(t1 - t0).count();
    total_ns += sec * 1e9;
    state.SetIterationTime(sec);
  }
  const double cpu = thread_cpu_ns() - cpu0;
  if (!core.all_answered_ok()) state.SkipWithError("a request was not answered with 0");
  state.SetLabel(small_request_name(kind));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n);
  const double requests = static_cast<double>(state.iterations()) * n;
  state.counters["ns_per_request"] = total_ns / requests;
  state.counters["cpu_ns_per_request"] = cpu / requests;
}

}  // namespace

BENCHMARK(BM_Dispatch)
    ->ArgNames({"kind", "batch"})
    ->ArgsProduct({{0, 1, 2}, {64, 1024}})
    ->UseManualTime()
    ->MinTime(0.2);

}  // namespace rvgl::bench
