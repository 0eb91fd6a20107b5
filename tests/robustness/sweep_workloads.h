// The scripted guest workloads the sweeps run (fault_sweep.h: each kernel call failing;
// alloc_sweep.h: each allocation failing), and the kernel calls each exists to reach.
#pragma once

#include "robustness/fault_sweep.h"

namespace rvgl::test::sweep {

// copy_workload.cpp: a BO and a userptr blob, SDMA and PM4 work on kernel queues, fences.
std::unique_ptr<SweepGuest> copy_guest(bool async);
extern const MustCall kCopyCalls;

// devices_workload.cpp: a udmabuf blob, a user queue and an SPM stream.
std::unique_ptr<SweepGuest> devices_guest(bool async);
extern const MustCall kDeviceCalls;  // udmabuf's import, the user queue, the SPM
extern const MustCall kAliasCalls;   // the same with udmabuf refused: its one refused call

}  // namespace rvgl::test::sweep
