// One repetition of a side's run, per job: wall time, the host-side issue time, this process's
// CPU time (every thread: the emulated GPU's workers and our completion engine included, when
// they live in this process), that CPU time by thread role (thread_cpu.h) and the emulator's
// ioctl count.
#pragma once

#include <benchmark/benchmark.h>
#include <time.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpu_side.h"
#include "rvgl_emu.h"
#include "stats.h"
#include "thread_cpu.h"

namespace rvgl::bench {

inline uint64_t process_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t emulator_ioctls() {
  rvgl_emu_counters c{};
  rvgl_emu_get_counters(&c, sizeof c);
  return c.ioctls;
}

// CPU per unit of work by thread role between two readings (thread_cpu.h): the emulated GPU's
// workers, the completion engine, and the rest of the process (the VMM's thread: the process
// total over the same span less those two, so what the /proc reads cost is in neither). Empty
// without schedstat.
struct CpuByThread {
  std::vector<double> gpu_ns, engine_ns, vmm_ns;
  std::vector<double> gpu_runs, engine_runs, vmm_runs;

  void add(const ThreadCpu &th0, const ThreadCpu &th1, uint64_t process_ns, double units) {
    if (!th0.known || !th1.known) return;
    const double gpu = static_cast<double>(th1.gpu_ns - th0.gpu_ns);
    const double engine = static_cast<double>(th1.engine_ns - th0.engine_ns);
    gpu_ns.push_back(gpu / units);
    engine_ns.push_back(engine / units);
    vmm_ns.push_back((static_cast<double>(process_ns) - gpu - engine) / units);
    gpu_runs.push_back(static_cast<double>(th1.gpu_runs - th0.gpu_runs) / units);
    engine_runs.push_back(static_cast<double>(th1.engine_runs - th0.engine_runs) / units);
    vmm_runs.push_back(static_cast<double>(th1.other_runs - th0.other_runs) / units);
  }
  bool empty() const { return gpu_ns.empty(); }
  // Medians as counters <prefix>{gpu,engine,vmm}_cpu_ns_per_<unit>; the engine's only where
  // `with_engine` (a side without our library has none).
  void report(benchmark::State &state, const std::string &prefix, const std::string &unit,
              bool with_engine) const {
    state.counters[prefix + "gpu_cpu_ns_per_" + unit] = median(gpu_ns);
    if (with_engine) state.counters[prefix + "engine_cpu_ns_per_" + unit] = median(engine_ns);
    state.counters[prefix + "vmm_cpu_ns_per_" + unit] = median(vmm_ns);
    state.counters[prefix + "gpu_runs_per_" + unit] = median(gpu_runs);
    if (with_engine) state.counters[prefix + "engine_runs_per_" + unit] = median(engine_runs);
    state.counters[prefix + "vmm_runs_per_" + unit] = median(vmm_runs);
  }
};

struct SideSamples {
  std::vector<double> wall_ns, issue_ns, cpu_ns, ioctls;
  CpuByThread by_thread;

  // Runs the side once and records per-job figures; returns the run's wall time in ns.
  uint64_t sample(GpuSide &side, Engine e, const IbSlot &ib, uint32_t jobs) {
    // The per-thread reads (a few /proc reads) stay outside the process CPU bracket.
    const ThreadCpu th0 = ThreadCpu::now();
    const uint64_t io0 = emulator_ioctls(), cpu0 = process_cpu_ns();
    const RunTiming t = side.run(e, ib, jobs);
    const uint64_t cpu1 = process_cpu_ns(), io1 = emulator_ioctls();
    const ThreadCpu th1 = ThreadCpu::now();
    by_thread.add(th0, th1, cpu1 - cpu0, jobs);
    wall_ns.push_back(static_cast<double>(t.total_ns) / jobs);
    issue_ns.push_back(static_cast<double>(t.issue_ns) / jobs);
    cpu_ns.push_back(static_cast<double>(cpu1 - cpu0) / jobs);
    ioctls.push_back(static_cast<double>(io1 - io0) / jobs);
    return t.total_ns;
  }
};

}  // namespace rvgl::bench
