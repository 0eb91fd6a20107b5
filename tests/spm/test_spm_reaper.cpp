// SpmReaper on its own: what drain() promises the tests and the library's exit.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "spm/spm_reaper.h"
#include "support/thread_count.h"

using namespace rvgl;
using namespace std::chrono_literals;

namespace {

// Counts its live copies; the last thing each copy does is leave the count, slowly, so a thread
// still destroying one when drain() returns is seen.
struct SlowToGo {
  static inline std::atomic<int> live{0};
  SlowToGo() { ++live; }
  SlowToGo(const SlowToGo &) { ++live; }
  ~SlowToGo() {
    std::this_thread::sleep_for(2ms);
    --live;
  }
};

}  // namespace

TEST_CASE("after drain() no reaper thread is left and nothing a `then` held is alive",
          "[spm][reaper]") {
  // At exit (or unload) drain() is the last word: a thread still running our code after it
  // returned would run it while static destructors, or the unmapping of the library, go on.
  SpmReaper::instance().drain();
  const int before = rvgl::test::thread_count();
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> ran{0};
    {
      SlowToGo held;
      // Still running when drain() starts to wait.
      SpmReaper::instance().retire(nullptr, [held, &ran] {
        std::this_thread::sleep_for(10ms);
        ++ran;
      });
    }
    SpmReaper::instance().drain();
    INFO("round " << round);
    CHECK(ran.load() == 1);
    CHECK(SlowToGo::live.load() == 0);
    CHECK(rvgl::test::thread_count() == before);
  }
}

TEST_CASE("sessions retired one after another leave no thread behind once drained",
          "[spm][reaper]") {
  // Each retire() finds the threads finished since the last one; none of them is left for the
  // process to carry.
  SpmReaper::instance().drain();
  const int before = rvgl::test::thread_count();
  std::atomic<int> ran{0};
  for (int i = 0; i < 64; ++i)
    SpmReaper::instance().retire(nullptr, [&ran] { ++ran; });
  SpmReaper::instance().drain();
  CHECK(ran.load() == 64);
  CHECK(rvgl::test::thread_count() == before);
}
