// The process-wide pacing of queue-health checks (src/queue/health_pacer.h): the interval between
// two checks of one context is one window while at most kLooksPerWindow queues are busy, and
// grows by one window per kLooksPerWindow busy queues; a queue is counted once per window however
// often it completes; an idle window brings the interval back.
#include <catch2/catch.hpp>

#include <vector>

#include "queue/health_pacer.h"

using rvgl::HealthPacer;

namespace {

constexpr int64_t W = HealthPacer::kWindowNs;
constexpr uint64_t K = HealthPacer::kLooksPerWindow;

// `n` distinct queues complete work at `now`, each `times` times.
void busy(HealthPacer &p, std::vector<int64_t> &windows, int64_t now, size_t n, int times = 1) {
  if (windows.size() < n) windows.resize(n, -1);
  for (int t = 0; t < times; ++t)
    for (size_t q = 0; q < n; ++q)
      p.note_busy(now, &windows[q]);
}

}  // namespace

TEST_CASE("health pacer: one window while few queues are busy", "[pacer]") {
  HealthPacer p;
  std::vector<int64_t> w;
  CHECK(p.interval_ns(10 * W) == W);  // nothing busy yet
  busy(p, w, 10 * W + 5, K, 50);      // 16 queues, each many times: still 16 busy
  CHECK(p.interval_ns(10 * W + 6) == W);
}

TEST_CASE("health pacer: the interval grows with busy queues, exactly", "[pacer]") {
  for (const size_t n : {K + 1, 2 * K, 2 * K + 1, 512ul}) {
    HealthPacer p;
    std::vector<int64_t> w;
    busy(p, w, 3 * W + 1, n, 3);
    const int64_t want = W * static_cast<int64_t>((n + K - 1) / K);
    CHECK(p.interval_ns(3 * W + 2) == want);
    // The next window still sees the last one's demand until it has its own...
    CHECK(p.interval_ns(4 * W) == want);
    // ...and a window with no busy queue at all brings it back to one window.
    CHECK(p.interval_ns(5 * W) == W);
  }
}

TEST_CASE("health pacer: a window's demand is the busier of it and the one before", "[pacer]") {
  HealthPacer p;
  std::vector<int64_t> w;
  busy(p, w, 7 * W, 4 * K);  // 4 windows' worth
  busy(p, w, 8 * W, K);      // the next window: fewer so far
  CHECK(p.interval_ns(8 * W + 1) == 4 * W);
  busy(p, w, 9 * W, K);  // the one before it had K: one window
  CHECK(p.interval_ns(9 * W + 1) == W);
  busy(p, w, 11 * W, 3 * K);  // after a gap: the old count is not carried over
  CHECK(p.interval_ns(11 * W + 1) == 3 * W);
}
