// The completion engine keeps timer deadlines in order: a wakeup asks no idle timer (every
// context has one, its health owner's) for its deadline, so its cost does not grow with the
// number of contexts. A timer is read when it is added, after its own tick, and when it says
// its deadline moved — exactly those times.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "amdgpu/amdgpu_device.h"
#include "amdgpu/render_node.h"
#include "queue/completion_engine.h"
#include "util/monotonic_clock.h"
#include "support/wait_for.h"

using namespace rvgl;
using rvgl::test::wait_for;

namespace {

class CountingTimer final : public CompletionEngine::Watch {
 public:
  explicit CountingTimer(int ticks_wanted = 0) : rounds(ticks_wanted) {}
  uint64_t arm_point() override { return 0; }
  void reached(uint64_t) override {}
  int64_t deadline_ns() override {
    reads.fetch_add(1);
    return at.load();
  }
  void tick(int64_t now) override {
    ticks.fetch_add(1);
    // Again 200 µs later until `rounds` ticks, then none.
    at.store(ticks.load() < rounds ? now + 200'000 : 0);
  }

  std::atomic<int64_t> at{0};
  std::atomic<int> reads{0};
  std::atomic<int> ticks{0};
  int rounds = 0;
};

// Its first ticks defer their work and leave the deadline as it was; the last ends it.
class StuckTimer final : public CompletionEngine::Watch {
 public:
  static constexpr int kTicks = 5;
  uint64_t arm_point() override { return 0; }
  void reached(uint64_t) override {}
  int64_t deadline_ns() override { return at.load(); }
  void tick(int64_t now) override {
    if (ticks.fetch_add(1) + 1 == kTicks) at.store(0);
    last_tick.store(now);
  }

  std::atomic<int64_t> at{0};
  std::atomic<int> ticks{0};
  std::atomic<int64_t> last_tick{0};
};

std::shared_ptr<CompletionEngine> engine_of_this_process() {
  int err = 0;
  auto dev = AmdgpuDevice::open(choose_render_node(""), &err);
  REQUIRE(dev);
  auto engine = CompletionEngine::acquire(*dev, &err);
  REQUIRE(engine);
  return engine;
}

}  // namespace

TEST_CASE("engine timers: idle timers are not asked on every wakeup", "[context][engine]") {
  auto owner = engine_of_this_process();
  CompletionEngine &engine = *owner;
  for (int round = 0; round < 20; ++round) {
    std::vector<std::unique_ptr<CountingTimer>> idle(200);
    std::vector<uint64_t> idle_ids;
    for (auto &t : idle) {
      t = std::make_unique<CountingTimer>();
      uint64_t id;
      REQUIRE(engine.add_timer(t.get(), &id) == 0);
      idle_ids.push_back(id);
    }
    CountingTimer active(25);
    uint64_t active_id;
    REQUIRE(engine.add_timer(&active, &active_id) == 0);
    // From another thread, as a context's VMM thread files a deadline: filed, then the thread is
    // woken to take it into its wait.
    active.at.store(monotonic_ns() + 200'000);
    engine.deadline_moved(active_id);
    engine.rearm();
    REQUIRE(wait_for([&] { return active.ticks.load() == active.rounds; }));
    engine.remove(active_id);  // waits out the call in progress (the last tick and its read)
    CHECK(active.ticks.load() == active.rounds);
    // Read at add, at deadline_moved, and after each tick: nothing else.
    CHECK(active.reads.load() == 2 + active.rounds);
    for (auto &t : idle) {
      CHECK(t->reads.load() == 1);
      CHECK(t->ticks.load() == 0);
    }
    for (uint64_t id : idle_ids)
      engine.remove(id);
  }
}

TEST_CASE("engine timers: a removed timer with a due deadline is never ticked",
          "[context][engine]") {
  auto owner = engine_of_this_process();
  CompletionEngine &engine = *owner;
  for (int round = 0; round < 50; ++round) {
    CountingTimer t(1000);
    uint64_t id;
    t.at.store(monotonic_ns() + 1'000'000'000);  // far away: filed at add
    REQUIRE(engine.add_timer(&t, &id) == 0);
    engine.remove(id);
    const int reads = t.reads.load();
    t.at.store(monotonic_ns());
    engine.deadline_moved(id);  // of a removed timer: ignored
    engine.rearm();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    CHECK(t.ticks.load() == 0);
    CHECK(t.reads.load() == reads);
  }
}

// A context's VMM thread files an earlier deadline (a deferred health check) while the engine
// sleeps. The engine must tick at that deadline, not at its 250 ms safety net; in eventfd mode its
// timerfd takes the deadline, so the thread is not woken first just to shorten its sleep (that
// wakeup cost a poll-mode VMM one engine wakeup per health interval).
TEST_CASE("engine timers: a deadline moved earlier by another thread is kept without a wakeup",
          "[context][engine]") {
  auto owner = engine_of_this_process();
  CompletionEngine &engine = *owner;
  for (int round = 0; round < 20; ++round) {
    CountingTimer t(1);
    uint64_t id;
    REQUIRE(engine.add_timer(&t, &id) == 0);                    // no deadline yet
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // asleep on the safety net
    const uint64_t rearms = engine.rearms();
    const int64_t at = monotonic_ns() + 5'000'000;
    t.at.store(at);
    engine.deadline_moved(id);
    engine.deadline_earlier();
    REQUIRE(wait_for([&] { return t.ticks.load() == 1; }));
    const int64_t late = monotonic_ns() - at;
    engine.remove(id);
    CHECK(late >= 0);
    CHECK(late < 100'000'000);  // the safety net would be 245 ms or more
    if (engine.uses_eventfd())
      CHECK(engine.rearms() == rearms);
    else
      CHECK(engine.rearms() == rearms + 1);  // wait mode: the thread is woken to take it
  }
}

// A health owner whose look came due within its pacing interval defers it and, until the next
// check, may leave the deadline where it was (already past). The engine ticks such a watch again
// on its next millisecond; it kept the timer for "the same deadline" and slept on its 250 ms
// safety net, so a deferred look (and every other deadline behind it) waited that long. Found by
// an audit.
TEST_CASE("engine timers: a deadline a tick left where it was is ticked again soon",
          "[context][engine]") {
  auto owner = engine_of_this_process();
  CompletionEngine &engine = *owner;
  for (int round = 0; round < 10; ++round) {
    StuckTimer t;
    uint64_t id;
    REQUIRE(engine.add_timer(&t, &id) == 0);
    const int64_t at = monotonic_ns() + 1'000'000;
    t.at.store(at);
    engine.deadline_moved(id);
    engine.deadline_earlier();
    REQUIRE(wait_for([&] { return t.ticks.load() == StuckTimer::kTicks; }));
    const int64_t took = t.last_tick.load() - at;
    engine.remove(id);
    // A millisecond or so per tick; before, each tick after the first waited for the safety net
    // (4 x 250 ms).
    CHECK(took < 200'000'000);
  }
}
