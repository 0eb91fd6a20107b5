// The allocation sweep (issue 13, point 6: exhaustion of memory is an error code, never an abort
// or half-made state). Each allocation the host library makes on the VMM's thread while it serves
// a scripted guest (sweep_workloads.h) fails in turn: that one alone, then that one and every
// later one (memory that stays short, so the undo and teardown paths meet it too). Every run is
// held to the kernel-call sweep's promises (fault_sweep.h): the work done or the guest told, here
// with -ENOMEM; every fence the VMM made retired once; nothing of ours left in the kernel or the
// host once the context is gone. The emulated kernel's allocations are not failed (a kernel short
// of memory answers ENOMEM, an errno like those the kernel-call sweep injects), nor those of the
// library's own threads (the completion engine, the SPM worker), whose count depends on timing.
#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <cstdio>

#include "robustness/alloc_failure.h"
#include "robustness/sweep_workloads.h"
#include "support/product_scope.h"

using namespace rvgl::test;
using namespace rvgl::test::sweep;

namespace {

constexpr int kCleanRuns = 10;
// How many allocations a run makes depends a little on when jobs end (a wait on a point already
// reached is left out, poll mode delivers fences on the VMM's thread when they are done): a
// position a run did not reach is asked for again until one does.
constexpr int kTries = 10;

struct Totals {
  uint64_t runs = 0, told = 0, completed = 0;
};

// One run with the nth allocation (and with from_then_on every later one) refused; what the run
// allocated and had refused.
alloc::Tally refused_run(const Workload &workload, bool async, uint64_t nth, bool from_then_on,
                         const Baseline &base, Totals &t) {
  INFO("allocation " << nth << (from_then_on ? " and every later one" : "") << " refused");
  product_call_escaped = nullptr;
  alloc::Armed refusing(nth, from_then_on);
  const Outcome o = workload(async)->run();
  const alloc::Tally tally = refusing.tally();
  ++t.runs;
  INFO("an exception left " << (product_call_escaped ? product_call_escaped : "no product call"));
  t.told += !o.told.empty();
  t.completed += o.data_ok;
  INFO("told: " << joined(o.told));
  // An exception out of the library is a failure of its own (the C API's guard would turn it into
  // an error value, but the guest whose request it was would wait for its response for ever).
  CHECK(o.harness_error == "");
  CHECK(joined(o.unretired) == "");
  CHECK(joined(o.in_use) == "");
  CHECK((o.data_ok || !o.told.empty()));
  for (const int32_t e : o.errnos)
    CHECK(e == -ENOMEM);
  CHECK(back_to(base));
  return tally;
}

void alloc_sweep(const Workload &workload, bool async, bool from_then_on) {
  const std::string mode = std::string(async ? "async callbacks" : "poll mode") +
                           (from_then_on ? ", refused from then on" : "");
  INFO(mode);
  const rvgl_emu_counters before_runs = emu_counters();
  std::optional<Baseline> base;
  uint64_t fewest = UINT64_MAX, most = 0;
  for (int i = 0; i < kCleanRuns; ++i) {
    alloc::Armed counting(0, false);
    const Outcome clean = workload(async)->run();
    const alloc::Tally tally = counting.tally();
    check_clean_run(clean, i, "allocation sweep (" + mode + ")", before_runs, base);
    fewest = std::min(fewest, tally.counted);
    most = std::max(most, tally.counted);
  }
  // The sweep would pass without touching the library if its calls were not marked.
  REQUIRE(fewest > 0);

  Totals t;
  uint64_t refused = 0, unreached = 0;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t n = 1; n <= most; ++n) {
    alloc::Tally last;
    for (int i = 0; i < kTries && !last.failed; ++i)
      last = refused_run(workload, async, n, from_then_on, *base, t);
    refused += last.failed > 0;
    // Every clean run made it: a run that did not was one whose jobs ended at other times (it
    // made fewer allocations in all), never one that skipped this allocation and made later ones.
    INFO("allocation " << n << " of " << fewest << " made by every clean run; the last try made "
                       << last.counted);
    if (n <= fewest && !last.failed) {
      CHECK(last.counted < n);
      ++unreached;
    }
  }
  // Only the last few, whose count depends on timing.
  CHECK(unreached <= 4);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  std::printf(
      "allocation sweep (%s): %llu-%llu allocations per clean run, %llu refused in turn (%llu "
      "not reached in %d tries); %llu runs, %llu told the guest, %llu completed, %lld ms\n",
      mode.c_str(), static_cast<unsigned long long>(fewest), static_cast<unsigned long long>(most),
      static_cast<unsigned long long>(refused), static_cast<unsigned long long>(unreached), kTries,
      static_cast<unsigned long long>(t.runs), static_cast<unsigned long long>(t.told),
      static_cast<unsigned long long>(t.completed), static_cast<long long>(ms));
}

}  // namespace

TEST_CASE("allocation sweep: BOs, a userptr blob, kernel queues and fences, poll mode",
          "[robust][alloc]") {
  alloc_sweep(copy_guest, false, false);
  alloc_sweep(copy_guest, false, true);
}

TEST_CASE("allocation sweep: BOs, a userptr blob, kernel queues and fences, async callbacks",
          "[robust][alloc]") {
  alloc_sweep(copy_guest, true, false);
  alloc_sweep(copy_guest, true, true);
}

TEST_CASE("allocation sweep: udmabuf blob, user queue and SPM stream, poll mode",
          "[robust][alloc]") {
  alloc_sweep(devices_guest, false, false);
  alloc_sweep(devices_guest, false, true);
}

TEST_CASE("allocation sweep: udmabuf blob, user queue and SPM stream, async callbacks",
          "[robust][alloc]") {
  alloc_sweep(devices_guest, true, false);
  alloc_sweep(devices_guest, true, true);
}
