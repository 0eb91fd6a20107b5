// Waits for a kernel queue's work in tests below the context (queues, health).
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <thread>

#include "queue/kernel_queue.h"

namespace rvgl::test {

// Waits (bounded, 10 s) until the queue's timeline reached `seq`: its job signalled, with or
// without an error.
inline void wait_signalled(const KernelQueue &q, uint64_t seq) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  uint64_t reached = 0;
  while (q.timeline()->query(&reached) == 0 && reached < seq &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(reached == seq);
}

}  // namespace rvgl::test
