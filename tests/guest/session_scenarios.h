// Scenarios both session tests run the same way, whichever transport is under the session
// (test_session.cpp: vtest; test_virtgpu_session.cpp: virtio-gpu); each test then checks what its
// transport sent.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "rvgl_session.h"

namespace rvgl::guest::test {

// 1200 QUERY_INFO responses of 128 bytes, over twice what the response area holds at once: each
// answer is the one to its own request (the host answers timestamp_base + seqno), so no slot was
// reused before its response was read.
inline void check_slots_reused_only_after_responses(Session &s, uint64_t timestamp_base) {
  std::vector<ResponseTicket> tickets;
  for (int batch = 0; batch < 12; ++batch) {
    auto enc = s.encoder();
    for (int i = 0; i < 100; ++i) {
      auto t = enc.query_info(RVGL_INFO_TIMESTAMP);
      REQUIRE(t);
      tickets.push_back(*t);
    }
    REQUIRE(s.submit(enc));
  }
  for (const auto &t : tickets) {
    auto r = s.wait(t);
    REQUIRE(r);
    REQUIRE(r->result == 0);
    REQUIRE(r->as<rvgl_rsp_query_info>().data.timestamp.gpu_timestamp == timestamp_base + t.seqno);
  }
  CHECK(s.shared_page().async_error() == 0);
}

// Nothing to wait for: wait_for_event times out. Then `post_event` (run on another thread after
// 50 ms) writes a QUEUE_RESET record and lets the host retire the events ring: the waiter wakes
// and reads exactly that record.
inline void check_event_wakes_waiter(Session &s, const std::function<void()> &post_event) {
  auto none = s.wait_for_event(std::chrono::milliseconds(30));
  REQUIRE(none);
  CHECK_FALSE(*none);
  std::thread host([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    post_event();
  });
  auto got = s.wait_for_event(std::chrono::seconds(5));
  host.join();
  REQUIRE(got);
  CHECK(*got);
  auto p = s.events().poll();
  REQUIRE(p.events.size() == 1);
  CHECK(p.events[0].type == RVGL_EVENT_QUEUE_RESET);
}

}  // namespace rvgl::guest::test
