// The fault-injection sweep (fault_sweep.h) over the second workload (devices_workload.cpp): the
// paths the first does not take, a udmabuf blob, a user queue and an SPM stream. Each run must end
// with the data right or the guest told, every fence retired once, and nothing of ours left.
#include <catch2/catch.hpp>

#include "robustness/fault_sweep.h"
#include "robustness/sweep_workloads.h"

using namespace rvgl::test;
using namespace rvgl::test::sweep;

TEST_CASE("fault-injection sweep: udmabuf blob, user queue and SPM stream, poll mode",
          "[robust][sweep]") {
  sweep::sweep(devices_guest, kDeviceCalls, false, "udmabuf, user queue, SPM");
}

TEST_CASE("fault-injection sweep: udmabuf blob, user queue and SPM stream, async callbacks",
          "[robust][sweep]") {
  sweep::sweep(devices_guest, kDeviceCalls, true, "udmabuf, user queue, SPM");
}

TEST_CASE("fault-injection sweep: the scattered blob through the alias when udmabuf fails",
          "[robust][sweep]") {
  // Every udmabuf the host asks for is refused: the import falls back to the alias (one mapping
  // of the memfd per piece in a reserved range, one userptr object), whose calls are swept.
  sweep::sweep(devices_guest, kAliasCalls, false, "udmabuf refused", "UDMABUF_CREATE_LIST:1+:EIO");
  sweep::sweep(devices_guest, kAliasCalls, true, "udmabuf refused", "UDMABUF_CREATE_LIST:1+:EIO");
}

TEST_CASE("fault-injection sweep: udmabuf, user queue and SPM, each call failing from then on",
          "[robust][sweep]") {
  sweep::sweep(devices_guest, kDeviceCalls, false, "udmabuf, user queue, SPM", "",
               Failure::kFromThenOn);
  sweep::sweep(devices_guest, kDeviceCalls, true, "udmabuf, user queue, SPM", "",
               Failure::kFromThenOn);
}
