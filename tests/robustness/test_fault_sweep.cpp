// Issue 7: fail each call the context makes into the kernel at each position of a scripted guest
// workload (fault_sweep.h says what every run is held to): kernel queues, a BO and a userptr blob
// of one range, SDMA and PM4 work, fences on both rings. Both delivery modes (async fence callbacks
// and poll), also with queues that have no user fence and with jobs still running when the fences
// are made; robustness-no-eventfd runs it on the completion engine's wait path
// (SYNCOBJ_TIMELINE_WAIT / _SIGNAL). test_fault_sweep_devices.cpp sweeps the other paths.
#include <catch2/catch.hpp>

#include "robustness/fault_sweep.h"
#include "robustness/sweep_workloads.h"

using namespace rvgl::test;
using namespace rvgl::test::sweep;

TEST_CASE("fault-injection sweep over every kernel call of a guest workload, poll mode",
          "[robust][sweep]") {
  sweep::sweep(copy_guest, kCopyCalls, false);
}

TEST_CASE("fault-injection sweep over every kernel call of a guest workload, async callbacks",
          "[robust][sweep]") {
  sweep::sweep(copy_guest, kCopyCalls, true);
}

TEST_CASE("fault-injection sweep, queues without a user fence", "[robust][sweep]") {
  // Every user fence's GEM_MMAP fails: a queue sees its completions through its timeline alone,
  // and a check asks each job's error of the kernel (WAIT_CS).
  sweep::sweep(copy_guest, kCopyCalls, false, "no user fence", "GEM_MMAP:1+:EIO");
  sweep::sweep(copy_guest, kCopyCalls, true, "no user fence", "GEM_MMAP:1+:EIO");
}

TEST_CASE("fault-injection sweep, fences made while the work still runs", "[robust][sweep]") {
  // Each job takes 2 ms: the fences wait for the engine's registrations and wakeups rather than
  // retiring inside create_fence, and the health checks come after them.
  ScopedKnob latency("RVGL_EMU_JOB_LATENCY_US", "2000");
  REQUIRE(latency.ok());
  sweep::sweep(copy_guest, kCopyCalls, false, "2 ms jobs");
  sweep::sweep(copy_guest, kCopyCalls, true, "2 ms jobs");
}

TEST_CASE("fault-injection sweep, each call failing from then on", "[robust][sweep]") {
  // A kernel that keeps refusing (out of memory, a device gone): the host's own cleanup, its
  // retries and the completion engine's and health owner's later calls meet the error too.
  sweep::sweep(copy_guest, kCopyCalls, false, "", "", Failure::kFromThenOn);
  sweep::sweep(copy_guest, kCopyCalls, true, "", "", Failure::kFromThenOn);
}
