// A gate word a test's GPU job polls before it goes on (an SDMA POLL_REGMEM on it), opened by a
// thread of its own: when told to, or at a deadline. A call that waits for the gated job then
// returns at the deadline rather than hanging the test, and a call that must wait for it can be
// made on the test's own thread while the watchdog opens the gate behind it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace rvgl::test {

class GateWatchdog {
 public:
  explicit GateWatchdog(uint32_t *gate,
                        std::chrono::milliseconds deadline = std::chrono::seconds(10))
      : gate_(gate), deadline_(deadline), thread_([this] { run(); }) {}
  ~GateWatchdog() {
    open();
    thread_.join();
  }
  GateWatchdog(const GateWatchdog &) = delete;
  GateWatchdog &operator=(const GateWatchdog &) = delete;
  void open() {
    std::lock_guard lk(mu_);
    now_ = true;
    cv_.notify_all();
  }

 private:
  void run() {
    std::unique_lock lk(mu_);
    cv_.wait_for(lk, deadline_, [this] { return now_; });
    __atomic_store_n(gate_, 1u, __ATOMIC_RELEASE);
  }
  uint32_t *gate_;
  std::chrono::milliseconds deadline_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool now_ = false;
  std::thread thread_;
};

}  // namespace rvgl::test
