// Polls a condition that another thread makes true, for tests.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace rvgl::test {

// Whether `cond` held within `timeout_ms`, checked every millisecond.
inline bool wait_for(const std::function<bool()> &cond, int timeout_ms = 5000) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace rvgl::test
