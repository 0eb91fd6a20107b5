// A warning a guest can cause as often as it likes (a refused context, a failure it provoked)
// must not flood the host's log: each call site lets through a burst per interval, as the
// kernel's printk_ratelimited() does, and says how many it left out with the next one it lets
// through. The numbers are the kernel's defaults (include/linux/ratelimit_types.h:
// DEFAULT_RATELIMIT_INTERVAL 5 * HZ, DEFAULT_RATELIMIT_BURST 10; lib/ratelimit.c ___ratelimit()).
#pragma once

#include <cstdint>
#include <mutex>

namespace rvgl::hooks {

class LogLimit {
 public:
  static constexpr int64_t kIntervalNs = 5'000'000'000;
  static constexpr uint32_t kBurst = 10;

  // Whether a message at now_ns goes out. When it opens a new interval, *left_out is the number
  // the interval before it refused (0 otherwise).
  bool allow(int64_t now_ns, uint32_t *left_out);

 private:
  std::mutex mu_;
  bool started_ = false;
  int64_t begin_ns_ = 0;
  uint32_t passed_ = 0;
  uint32_t refused_ = 0;
};

}  // namespace rvgl::hooks
