// FenceDelivery with async callbacks (queue/fence_delivery.h): one thread delivers at a time, and
// a thread that finds a delivery running leaves its fences to it rather than waiting for it.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "queue/fence_delivery.h"

using namespace rvgl;

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
    CHECK(d->delivered() == 2);
    CHECK(d->pending() == 0);
  }
}
