// Entry point of the Google Benchmark programs: the emulator is linked in, so its knobs are set
// here rather than by a preload environment.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>

#include "rvgl_emu.h"
#include "support/error_tracking_reporter.h"

int main(int argc, char **argv) {
  // Failing ioctls are part of some runs' setup probing; their trace would swamp the JSON on
  // stdout's neighbour. Jobs run at emulator speed: no artificial latency unless asked.
  setenv("RVGL_EMU_TRACE", "0", 0);
  setenv("RVGL_EMU_JOB_LATENCY_US", "0", 0);
  setenv("RVGL_COMPUTE_ONLY", "1", 0);
  rvgl_emu_set_knob("RVGL_EMU_TRACE", std::getenv("RVGL_EMU_TRACE"));
  rvgl_emu_set_knob("RVGL_EMU_JOB_LATENCY_US", std::getenv("RVGL_EMU_JOB_LATENCY_US"));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  rvgl::bench::ErrorTrackingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return reporter.failed() ? 1 : 0;
}
