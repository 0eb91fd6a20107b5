// FenceDelivery with async callbacks (queue/fence_delivery.h): one thread delivers at a time, and
// a thread that finds a delivery running leaves its fences to it rather than waiting for it.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <new>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "queue/fence_delivery.h"
#include "support/replaced_new.h"

using namespace rvgl;

namespace {

// Allocations this thread may still make before every later one fails (-1: no limit): a test's
// way to run out of memory inside the code it calls, on its own thread only.
thread_local int t_allocations_left = -1;

}  // namespace

// This program's allocations (support/replaced_new.h).
void *rvgl::test::replaced_allocate(std::size_t n, std::size_t align) noexcept {
  if (t_allocations_left == 0) return nullptr;
  if (t_allocations_left > 0) --t_allocations_left;
  return malloc_aligned(n, align);
}

namespace {

struct Delivered {
  uint64_t id;
  std::thread::id thread;
};

}  // namespace

TEST_CASE("a fence added while another thread delivers is left to that thread",
          "[fence-delivery]") {
  for (int run = 0; run < 50; ++run) {
    std::mutex mu;
    std::vector<Delivered> got;
    std::promise<void> entered, release;
    std::shared_future<void> released = release.get_future().share();
    int err = 0;
    auto d = FenceDelivery::create(
        /*async=*/true,
        [&](uint32_t, uint64_t id) {
          {
            std::lock_guard lk(mu);
            got.push_back({id, std::this_thread::get_id()});
          }
          if (id == 1) {
            entered.set_value();
            released.wait();  // the engine (or the VMM) busy in a callback
          }
        },
        &err);
    REQUIRE(d);
    // Fence 1 has nothing to wait for: the adding thread delivers it and stays in its callback.
    std::thread first([&] { d->add(3, 1, nullptr, 0, false); });
    entered.get_future().wait();
    // Fence 2 on the same ring, from another thread: add() returns at once, undelivered.
    auto second = std::async(std::launch::async, [&] { d->add(3, 2, nullptr, 0, false); });
    const bool returned = second.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
    {
      std::lock_guard lk(mu);
      CHECK(got.size() == 1);
    }
    release.set_value();
    first.join();
    second.wait();
    CHECK(returned);
    // The running delivery took it, in order, on its own thread; each exactly once.
    REQUIRE(got.size() == 2);
    CHECK(got[0].id == 1);
    CHECK(got[1].id == 2);
    CHECK(got[1].thread == got[0].thread);
    CHECK(d->retired() == 2);
    CHECK(d->pending() == 0);
  }
}

namespace {

// A source the test moves by hand.
class ManualSource final : public FenceSource {
 public:
  uint64_t reached() const override { return at_.load(); }
  void reach(uint64_t p) { at_.store(p); }

 private:
  std::atomic<uint64_t> at_{0};
};

struct Report {
  uint32_t ring;
  uint64_t id;
};

// An async delivery that records the ids it reports, in order.
std::unique_ptr<FenceDelivery> recording_delivery(std::vector<uint64_t> *got) {
  int err = 0;
  auto d = FenceDelivery::create(
      true, [got](uint32_t, uint64_t id) { got->push_back(id); }, &err);
  REQUIRE(d);
  return d;
}

}  // namespace

TEST_CASE("mergeable fences that retire together are reported by the newest of their ring",
          "[fence-delivery]") {
  const bool async = GENERATE(true, false);
  std::vector<Report> got;
  int err = 0;
  auto d = FenceDelivery::create(
      async,
      [&](uint32_t ring, uint64_t id) {
        got.push_back({ring, id});
      },
      &err);
  REQUIRE(d);
  auto a = std::make_shared<ManualSource>();
  auto b = std::make_shared<ManualSource>();
  // Ring 1: five mergeable fences, then a non-mergeable one, then two more mergeable ones.
  for (uint64_t p = 1; p <= 5; ++p)
    d->add(1, 100 + p, a, p, true);
  d->add(1, 106, a, 6, false);
  d->add(1, 107, a, 7, true);
  d->add(1, 108, a, 8, true);
  // Ring 2: mergeable fences on another source, which is not reached.
  d->add(2, 201, b, 1, true);
  d->add(2, 202, b, 2, true);
  auto deliver = [&] {
    d->progress();
    if (!async) d->poll();
  };
  deliver();
  CHECK(got.empty());

  // Points 1..3 at once: one report, the newest ready fence of the run.
  a->reach(3);
  deliver();
  REQUIRE(got.size() == 1);
  CHECK(got[0].id == 103);
  // 4..7: the non-mergeable fence 106 is reported itself; 104 and 105 merge into it; 107 is
  // the last ready one, so it is reported although mergeable.
  a->reach(7);
  deliver();
  REQUIRE(got.size() == 3);
  CHECK(got[1].id == 106);
  CHECK(got[2].id == 107);
  // Nothing on ring 2 moved; ring 1's last fence comes alone.
  a->reach(8);
  b->reach(2);
  deliver();
  REQUIRE(got.size() == 5);
  CHECK(got[3].ring + got[4].ring == 3);  // one report per ring
  for (size_t i = 3; i < 5; ++i)
    CHECK(got[i].id == (got[i].ring == 1 ? 108u : 202u));
  // Every fence retired exactly once, whether reported or merged.
  CHECK(d->retired() == 10);
  CHECK(d->pending() == 0);
}

TEST_CASE("a non-mergeable fence is reported even when a later one retires with it",
          "[fence-delivery]") {
  std::vector<uint64_t> got;
  auto d = recording_delivery(&got);
  auto a = std::make_shared<ManualSource>();
  for (uint64_t p = 1; p <= 4; ++p)
    d->add(0, p, a, p, false);
  a->reach(4);
  d->progress();
  CHECK(got == std::vector<uint64_t>{1, 2, 3, 4});
}

// create_fence's user-fence path makes a point known and then adds the fence: an earlier fence
// of the ring that waited for an earlier point retires in that same add, not at a later wakeup.
TEST_CASE("add delivers an earlier fence whose point the caller just made known",
          "[fence-delivery]") {
  std::vector<uint64_t> got;
  auto d = recording_delivery(&got);
  auto a = std::make_shared<ManualSource>();
  d->add(4, 1, a, 1, false);
  CHECK(got.empty());
  a->reach(2);  // no progress() call: the caller goes on to add its fence
  d->add(4, 2, a, 2, false);
  CHECK(got == std::vector<uint64_t>{1, 2});
  // A fence behind an unreached one waits, even when its own point is reached.
  d->add(4, 3, a, 4, false);
  d->add(4, 4, a, 2, false);
  CHECK(got.size() == 2);
  CHECK(d->pending() == 2);
}

// The three threads that make progress in a context: the VMM's adds fences, the GPU's side makes
// their points known and calls progress() (the engine's QueueWatch::reached), and a third calls
// progress() with nothing new (another queue's completion). A deliverer that stops collecting
// while another thread's point is unseen would strand a fence; one that collected twice would
// report it twice. Every fence is non-mergeable, so each must be reported once, in order.
TEST_CASE("points made known while another thread delivers: every fence once, in order",
          "[fence-delivery]") {
  constexpr uint64_t kFences = 2000;
  for (int run = 0; run < 200; ++run) {
    std::mutex mu;
    std::vector<uint64_t> got;
    int err = 0;
    auto d = FenceDelivery::create(
        true,
        [&](uint32_t, uint64_t id) {
          std::lock_guard lk(mu);
          got.push_back(id);
        },
        &err);
    REQUIRE(d);
    auto src = std::make_shared<ManualSource>();
    std::atomic<bool> done{false};
    std::thread vmm([&] {
      for (uint64_t i = 1; i <= kFences; ++i)
        d->add(0, i, src, i, false);
    });
    std::thread gpu([&] {
      for (uint64_t p = 1; p <= kFences; ++p) {
        src->reach(p);
        d->progress();
      }
    });
    std::thread other([&] {
      while (!done.load())
        d->progress();
    });
    vmm.join();
    gpu.join();
    done.store(true);
    other.join();
    // No progress() here: what the threads did must have delivered everything.
    std::lock_guard lk(mu);
    REQUIRE(got.size() == kFences);
    size_t out_of_order = 0;
    for (uint64_t i = 0; i < kFences; ++i)
      out_of_order += got[i] != i + 1;
    REQUIRE(out_of_order == 0);
    CHECK(d->retired() == kFences);
    CHECK(d->pending() == 0);
  }
}

// stop() waits a delivery out, and after it returns nothing is called back, whichever thread was
// about to deliver: one stop() lands while a callback runs, and others at random points of a
// delivery (the collect that claims it and stop() may cross).
TEST_CASE("no callback runs once stop() has returned", "[fence-delivery]") {
  for (int run = 0; run < 500; ++run) {
    std::atomic<bool> stop_returned{false};
    std::atomic<int> late{0};
    std::promise<void> entered;
    const bool in_callback = run == 0;
    int err = 0;
    auto d = FenceDelivery::create(
        true,
        [&](uint32_t, uint64_t id) {
          if (in_callback && id == 1) {
            entered.set_value();
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          }
          if (stop_returned.load()) late.fetch_add(1);
        },
        &err);
    REQUIRE(d);
    auto src = std::make_shared<ManualSource>();
    for (uint64_t i = 1; i <= 64; ++i)
      d->add(static_cast<uint32_t>(i % 4), i, src, i, false);
    std::thread gpu([&] {
      for (uint64_t p = 1; p <= 64; ++p) {
        src->reach(p);
        d->progress();
      }
    });
    if (in_callback) entered.get_future().wait();
    d->stop();
    stop_returned.store(true);
    gpu.join();
    CHECK(late.load() == 0);
  }
}

namespace {

class SettableSource final : public FenceSource {
 public:
  uint64_t reached() const override { return at.load(); }
  std::atomic<uint64_t> at{0};
};

// 100 fences on ring 5 waiting for points 1-100 of `source`; the callback collects them in `got`,
// reserved so that it allocates nothing itself.
struct HundredFences {
  std::vector<uint64_t> got;
  std::shared_ptr<SettableSource> source = std::make_shared<SettableSource>();
  std::unique_ptr<FenceDelivery> d;

  explicit HundredFences(bool async) {
    got.reserve(256);
    int err = 0;
    d = FenceDelivery::create(
        async, [this](uint32_t, uint64_t id) { got.push_back(id); }, &err);
    REQUIRE(d);
    for (uint64_t i = 1; i <= 100; ++i)
      d->add(5, i, source, i, /*mergeable=*/false);
  }
  HundredFences(const HundredFences &) = delete;
  HundredFences &operator=(const HundredFences &) = delete;

  bool each_once_in_order() const {
    std::vector<uint64_t> want(100);
    std::iota(want.begin(), want.end(), 1);
    return got == want;
  }
};

}  // namespace

TEST_CASE("a delivery that runs out of memory part-way delivers every fence once, in order",
          "[fence-delivery]") {
  // The batch a delivery collects grows as it goes. Out of memory part-way, the exception left
  // progress() with the fences collected so far taken off their ring and dropped with the batch
  // (or, after the first round, the delivery claimed for ever): a guest waiting on them hung.
  // Found by an audit.
  for (const int allowed : {0, 1, 2, 5}) {
    INFO("allocations allowed: " << allowed);
    HundredFences f(/*async=*/true);
    REQUIRE(f.got.empty());
    f.source->at = 100;
    bool threw = false;
    t_allocations_left = allowed;
    try {
      f.d->progress();
    } catch (const std::bad_alloc &) {
      threw = true;
    }
    t_allocations_left = -1;
    f.d->progress();  // with memory again: whatever is left
    CHECK_FALSE(threw);
    CHECK(f.each_once_in_order());
  }
}

TEST_CASE("a poll-mode delivery that runs out of memory loses no fence", "[fence-delivery]") {
  // poll() swapped the ready fences into its batch and then collected more into it: out of memory
  // there, the batch went with the exception, and the fences in it were never delivered.
  for (const int allowed : {0, 1, 2, 3, 4, 8}) {
    INFO("allocations allowed: " << allowed);
    HundredFences f(/*async=*/false);
    f.source->at = 50;
    f.d->progress();  // the engine's part: 1-50 wait for the VMM's poll
    f.source->at = 100;
    t_allocations_left = allowed;
    try {
      f.d->poll();
    } catch (const std::bad_alloc &) {
    }
    t_allocations_left = -1;
    f.d->poll();
    CHECK(f.each_once_in_order());
  }
}

TEST_CASE("a fence added with no memory left stands for the ring's fences since then",
          "[fence-delivery]") {
  // add() grew the ring's deque: out of memory, the exception went to create_fence, the VMM
  // (QEMU ignores the result) kept the guest's command waiting for a fence that no one would
  // report.
  for (const bool async : {true, false}) {
    INFO((async ? "async" : "poll mode"));
    std::vector<uint64_t> got;
    got.reserve(64);
    int err = 0;
    auto d = FenceDelivery::create(
        async, [&](uint32_t ring, uint64_t id) { got.push_back(ring == 5 ? id : 0); }, &err);
    REQUIRE(d);
    auto source = std::make_shared<SettableSource>();
    auto deliver = [&] {
      d->progress();
      d->poll();
    };
    // 1-30 with no memory at all: the first fit where the ring has room from its creation.
    std::vector<uint64_t> positions(30);
    bool threw = false;
    t_allocations_left = 0;
    try {
      for (uint64_t i = 1; i <= 30; ++i)
        positions[i - 1] = d->add(5, i, source, i, /*mergeable=*/false);
    } catch (const std::bad_alloc &) {
      threw = true;
    }
    t_allocations_left = -1;
    REQUIRE_FALSE(threw);
    for (uint64_t i = 1; i <= 30; ++i)
      CHECK(positions[i - 1] == i);
    // 31-35 with memory again, behind them.
    for (uint64_t i = 31; i <= 35; ++i)
      CHECK(d->add(5, i, source, i, false) == i);
    CHECK(d->waiting() == 35);
    CHECK(d->first_pending_point(source.get()) == 1);

    source->at = 29;
    deliver();
    REQUIRE_FALSE(got.empty());
    const uint64_t had_room = got.size();  // reported each, in order
    REQUIRE(had_room < 29);
    for (uint64_t i = 0; i < had_room; ++i)
      CHECK(got[i] == i + 1);
    // The rest of 1-30 wait for 30's point, and are taken off with it.
    CHECK(d->first_pending_point(source.get()) == 30);
    CHECK(d->waiting() == 35 - had_room);
    CHECK_FALSE(d->taken_through(5, had_room + 1));

    source->at = 35;
    deliver();
    std::vector<uint64_t> want(had_room);
    std::iota(want.begin(), want.end(), 1);
    for (const uint64_t id : {30, 31, 32, 33, 34, 35})
      want.push_back(id);
    CHECK(got == want);
    CHECK(d->retired() == 35);
    CHECK(d->waiting() == 0);
    CHECK(d->pending() == 0);
    CHECK(d->taken_through(5, 35));
    CHECK(d->first_pending_point(source.get()) == 0);
  }
}

TEST_CASE("a fence that stands for spilled ones never retires before their work",
          "[fence-delivery]") {
  // One that waits for nothing (the ring's queue was destroyed) waits for what the spilled one
  // waited for; one of another timeline cannot hold both conditions, and is refused.
  std::vector<uint64_t> got;
  got.reserve(64);
  int err = 0;
  auto d = FenceDelivery::create(
      true, [&](uint32_t, uint64_t id) { got.push_back(id); }, &err);
  REQUIRE(d);
  auto a = std::make_shared<SettableSource>();
  auto b = std::make_shared<SettableSource>();
  bool threw = false;
  uint64_t with_nothing = 0, on_b = 0;
  t_allocations_left = 0;
  try {
    for (uint64_t i = 1; i <= 30; ++i)  // the last ones spilled, as in the case above
      d->add(2, i, a, i, /*mergeable=*/false);
    with_nothing = d->add(2, 31, nullptr, 0, false);
    on_b = d->add(2, 32, b, 1, false);
  } catch (const std::bad_alloc &) {
    threw = true;
  }
  t_allocations_left = -1;
  REQUIRE_FALSE(threw);
  CHECK(with_nothing == 31);
  CHECK(on_b == 0);
  CHECK(d->waiting() == 31);
  b->at = 1;
  a->at = 29;
  d->progress();
  REQUIRE_FALSE(got.empty());
  CHECK(got.back() < 29);  // 30 and 31 wait for point 30
  a->at = 30;
  d->progress();
  REQUIRE(got.size() >= 2);
  CHECK(got.back() == 31);
  CHECK(got[got.size() - 2] < 29);
  CHECK(d->retired() == 31);
  CHECK(d->waiting() == 0);
}
