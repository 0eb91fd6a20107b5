// CPU time of this process's threads by role, from /proc/self/task/*/schedstat (field 1: ns on a
// CPU), so a per-job CPU figure says which thread spent it: the emulated GPU's ring workers
// (named emu-ring) and the completion engine (rvgl-completion); the rest (the VMM's thread) is
// the process total less those, since the thread reading /proc pays for the reads itself. With
// two CPUs, wall time per job follows the sum once it exceeds the GPU's share; the split shows
// what an overhead costs where a process-wide total cannot.
#pragma once

#include <cstdint>

namespace rvgl::bench {

struct ThreadCpu {
  uint64_t gpu_ns = 0, engine_ns = 0;
  // Times each role's threads were put on a CPU (schedstat field 3): a sleeping thread pays one
  // per wakeup, so these count hand-offs where a process-wide switch count cannot say whose.
  uint64_t gpu_runs = 0, engine_runs = 0, other_runs = 0;
  bool known = false;  // false: no schedstat (a kernel without CONFIG_SCHED_INFO)

  static ThreadCpu now();
};

}  // namespace rvgl::bench
