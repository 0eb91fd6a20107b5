// The completion engine does not wait for a point its watch can already tell has ended (a
// queue's user fence shows the job done): it offers the point to the watch at once, with no
// SYNCOBJ_EVENTFD registration (eventfd mode) and no wait ioctl (wait mode) that the kernel would
// only answer at once. A burst's newest point is often done by the time the engine wakes for an
// older one. A watch may refuse such a point; the kernel reports it then.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "amdgpu/amdgpu_device.h"
#include "amdgpu/render_node.h"
#include "queue/completion_engine.h"
#include "queue/sync_timeline.h"
#include "support/scoped_knob.h"
#include "support/wait_for.h"

using namespace rvgl;
using rvgl::test::ScopedKnob;
using rvgl::test::wait_for;

namespace {

// A queue as the engine sees it: the newest point submitted, the newest one its "user fence"
// shows finished, and the points the engine reported, in order. `take_early`: whether it takes a
// point found in memory (a queue's health owner takes it only when its look is deferred anyway).
class ScriptedWatch final : public CompletionEngine::Watch {
 public:
  explicit ScriptedWatch(bool take_early = true) : take_early_(take_early) {}
  uint64_t arm_point() override {
    const uint64_t known = known_.load();
    const uint64_t last = submitted.load();
    return last > known ? last : known + 1;
  }
  void reached(uint64_t point) override {
    std::lock_guard lk(mu_);
    seen_.push_back(point);
    known_.store(std::max(known_.load(), point));
  }
  uint64_t signalled_from(uint64_t point) override {
    const uint64_t d = finished.load();
    return d >= point ? d : 0;
  }
  bool reached_early(uint64_t point) override {
    offered.fetch_add(1);
    if (!take_early_) return false;
    reached(point);
    return true;
  }
  std::vector<uint64_t> seen() {
    std::lock_guard lk(mu_);
    return seen_;
  }

  std::atomic<uint64_t> submitted{0};
  std::atomic<uint64_t> finished{0};
  std::atomic<int> offered{0};  // reached_early() calls

 private:
  const bool take_early_;
  std::atomic<uint64_t> known_{0};
  std::mutex mu_;
  std::vector<uint64_t> seen_;
};

// 50 rounds, each with a new timeline and watch: idle (in eventfd mode the engine registers for
// point 1 before it is submitted), then a burst of three that the kernel signals and the user
// fence shows done by the time the engine wakes for the first, then idle again. Checks the points
// reported and, in eventfd mode, that exactly `registrations` were made.
void run_bursts(bool take_early, uint64_t registrations) {
  int err = 0;
  auto dev = AmdgpuDevice::open(choose_render_node(""), &err);
  REQUIRE(dev);
  auto engine = CompletionEngine::acquire(*dev, &err);
  REQUIRE(engine);
  const bool eventfd = engine->uses_eventfd();
  for (int round = 0; round < 50; ++round) {
    auto tl = SyncTimeline::create(dev, &err);
    REQUIRE(tl);
    ScriptedWatch w(take_early);
    const uint64_t start = engine->registrations().own;
    uint64_t id;
    REQUIRE(engine->add(*tl, &w, &id) == 0);
    if (eventfd) REQUIRE(wait_for([&] { return engine->registrations().own == start + 1; }));
    // The user fence first: an engine that reads the new arm point (wait mode has nothing that
    // tells the test when it waits) must find it done, or it waits for it through the kernel and
    // nothing is offered early (1 run in 22 under ASan).
    w.finished.store(3);
    w.submitted.store(3);
    REQUIRE(dev->syncobj_timeline_signal(tl->handle(), 3) == 0);
    REQUIRE(wait_for([&] { return !w.seen().empty() && w.seen().back() == 3; }));
    // The last registration (point 4, idle again) follows the report of point 3.
    if (eventfd)
      REQUIRE(wait_for([&] { return engine->registrations().own >= start + registrations; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    engine->remove(id);
    CHECK(w.offered.load() == 1);
    const auto seen = w.seen();
    if (eventfd) {
      CHECK(seen == std::vector<uint64_t>{1, 3});
      CHECK(engine->registrations().own == start + registrations);
    } else {
      // The one wait may first look after the burst was filed (nothing tells the test when it
      // waits for point 1): then point 3 is its first, and only, report.
      CHECK((seen == std::vector<uint64_t>{1, 3} || seen == std::vector<uint64_t>{3}));
    }
  }
}

}  // namespace

TEST_CASE("engine arming: a point already finished is reported without a registration",
          "[context][engine]") {
  run_bursts(/*take_early=*/true, /*registrations=*/2);  // points 1 and 4; 3 needed none
}

// A watch that refuses the early point (its health owner would look now, and the kernel may not
// have recorded that job's fault yet) gets it from the kernel instead: the engine registers for it
// (eventfd mode) or waits for it, and never offers it early again.
TEST_CASE("engine arming: a refused early point is left to the kernel", "[context][engine]") {
  run_bursts(/*take_early=*/false, /*registrations=*/3);  // points 1, 3 (refused) and 4
}

// A kernel that refuses every SYNCOBJ_EVENTFD registration (eventfd mode) or every
// SYNCOBJ_TIMELINE_WAIT (wait mode), as one out of memory does: each point is still reported,
// once, through SYNCOBJ_QUERY, and no registration is counted. Before, the engine only asked again
// for the registration and the points were never reported.
TEST_CASE("engine arming: points the kernel refuses to register or wait for are still reported",
          "[context][engine]") {
  int err = 0;
  auto dev = AmdgpuDevice::open(choose_render_node(""), &err);
  REQUIRE(dev);
  auto engine = CompletionEngine::acquire(*dev, &err);
  REQUIRE(engine);
  ScopedKnob refuse(
      "RVGL_EMU_FAIL",
      engine->uses_eventfd() ? "SYNCOBJ_EVENTFD:1+:ENOMEM" : "SYNCOBJ_TIMELINE_WAIT:1+:ENOMEM", "");
  REQUIRE(refuse.ok());
  for (int round = 0; round < 20; ++round) {
    auto tl = SyncTimeline::create(dev, &err);
    REQUIRE(tl);
    ScriptedWatch w(/*take_early=*/false);  // nothing offered early: the kernel must say
    const uint64_t registered = engine->registrations().own;
    uint64_t id;
    REQUIRE(engine->add(*tl, &w, &id) == 0);
    for (uint64_t p = 1; p <= 3; ++p) {
      w.submitted.store(p);
      REQUIRE(dev->syncobj_timeline_signal(tl->handle(), p) == 0);
      REQUIRE(wait_for([&] { return !w.seen().empty() && w.seen().back() == p; }));
    }
    engine->remove(id);
    CHECK(w.seen() == std::vector<uint64_t>{1, 2, 3});
    CHECK(w.offered.load() == 0);
    CHECK(engine->registrations().own == registered);
  }
}
