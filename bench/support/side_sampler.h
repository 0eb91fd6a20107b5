// One repetition of a side's run, per job: wall time, the host-side issue time, this process's
// CPU time (every thread: the emulated GPU's workers and our completion engine included, when
// they live in this process), that CPU time by thread role (thread_cpu.h) and the emulator's
// ioctl count.
#pragma once

#include <time.h>

#include <cstdint>
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

struct SideSamples {
  std::vector<double> wall_ns, issue_ns, cpu_ns, ioctls;
  std::vector<double> gpu_cpu_ns, engine_cpu_ns, other_cpu_ns;  // empty without schedstat

  // Runs the side once and records per-job figures; returns the run's wall time in ns.
  uint64_t sample(GpuSide &side, Engine e, const IbSlot &ib, uint32_t jobs) {
    // The per-thread reads (a few /proc reads) stay outside the process CPU bracket.
    const ThreadCpu th0 = ThreadCpu::now();
    const uint64_t io0 = emulator_ioctls(), cpu0 = process_cpu_ns();
    const RunTiming t = side.run(e, ib, jobs);
    const uint64_t cpu1 = process_cpu_ns(), io1 = emulator_ioctls();
    const ThreadCpu th1 = ThreadCpu::now();
    if (th0.known && th1.known) {
      // The rest is the process total less those two: what the reads cost is in neither.
      const double gpu = static_cast<double>(th1.gpu_ns - th0.gpu_ns);
      const double engine = static_cast<double>(th1.engine_ns - th0.engine_ns);
      gpu_cpu_ns.push_back(gpu / jobs);
      engine_cpu_ns.push_back(engine / jobs);
      other_cpu_ns.push_back((static_cast<double>(cpu1 - cpu0) - gpu - engine) / jobs);
    }
    wall_ns.push_back(static_cast<double>(t.total_ns) / jobs);
    issue_ns.push_back(static_cast<double>(t.issue_ns) / jobs);
    cpu_ns.push_back(static_cast<double>(cpu1 - cpu0) / jobs);
    ioctls.push_back(static_cast<double>(io1 - io0) / jobs);
    return t.total_ns;
  }
};

}  // namespace rvgl::bench
