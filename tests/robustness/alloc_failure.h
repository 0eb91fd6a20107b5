// Allocation failure on demand, for the allocation sweep (alloc_sweep.cpp). The binary that links
// alloc_failure.cpp has its own global operator new and delete; on a thread that armed it, they
// count the allocations made inside product calls (support/product_scope.h), outside the emulated
// kernel's own (rvgl_emu_thread_in_kernel()), and fail the one asked for (std::bad_alloc, or
// nullptr from the nothrow forms), or that one and every later one. Other threads and the test's
// own code allocate as usual.
#pragma once

#include <cstdint>

namespace rvgl::test::alloc {

// nth = 0 counts only.
void arm(uint64_t nth, bool from_then_on);

struct Tally {
  uint64_t counted = 0;  // allocations made inside product calls while armed
  uint64_t failed = 0;   // of them, the ones refused
};
Tally disarm();

// Armed for the scope: a failed REQUIRE inside leaves nothing armed for the next test.
class Armed {
 public:
  Armed(uint64_t nth, bool from_then_on) { arm(nth, from_then_on); }
  ~Armed() { disarm(); }
  Tally tally() { return disarm(); }
  Armed(const Armed &) = delete;
  Armed &operator=(const Armed &) = delete;
};

// The product's own threads (no test code runs on them but its callbacks): the allocations of
// every thread named `thread_name` (pthread_setname_np; the completion engine's is
// "rvgl-completion"), outside the emulated kernel's own and the test's callbacks (TestCallback),
// are counted, and the nth fails, or that one and every later one, until stopped (nth = 0
// counts only).
void refuse_on_thread(const char *thread_name, uint64_t nth, bool from_then_on);
Tally stop_refusing_on_thread();

class RefusedOnThread {
 public:
  RefusedOnThread(const char *thread_name, uint64_t nth, bool from_then_on) {
    refuse_on_thread(thread_name, nth, from_then_on);
  }
  ~RefusedOnThread() { stop_refusing_on_thread(); }
  Tally stop() { return stop_refusing_on_thread(); }
  RefusedOnThread(const RefusedOnThread &) = delete;
  RefusedOnThread &operator=(const RefusedOnThread &) = delete;
};

}  // namespace rvgl::test::alloc
