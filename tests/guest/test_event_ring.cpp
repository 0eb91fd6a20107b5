#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "context/shmem_view.h"
#include "rvgl_event_ring.h"
#include "support/guarded_shmem.h"

using rvgl::guest::EventRingReader;

namespace {

// Writes events the way PROTOCOL.md §4 says the host does: the record, then event_wptr (release);
// when the ring is full the record is dropped and event_overflow counts it.
struct HostEvents {
  rvgl::test::GuardedShmem mem;
  rvgl::ShmemView view{mem.base(), RVGL_SHMEM_SIZE};

  HostEvents() { view.init_header(); }
  rvgl_shmem_header *h() { return view.header(); }

  bool push(uint32_t type, uint64_t payload0) {
    if (h()->event_wptr - h()->event_rptr >= RVGL_EVENT_RING_ENTRIES) {
      ++h()->event_overflow;
      return false;
    }
    rvgl_event ev{};
    ev.seq = h()->event_wptr + 1;
    ev.type = type;
    ev.queue = RVGL_EVENT_QUEUE_NONE;
    ev.payload[0] = payload0;
    std::memcpy(mem.base() + RVGL_EVENT_RING_OFFSET +
                    (h()->event_wptr % RVGL_EVENT_RING_ENTRIES) * sizeof(rvgl_event),
                &ev, sizeof(ev));
    __atomic_store_n(&h()->event_wptr, h()->event_wptr + 1, __ATOMIC_RELEASE);
    return true;
  }
};

}  // namespace

TEST_CASE("events are read in order and the read index is written back", "[guest][events]") {
  HostEvents host;
  EventRingReader reader(host.mem.base());
  CHECK(reader.poll().events.empty());
  for (uint64_t i = 0; i < 3; ++i)
    REQUIRE(host.push(RVGL_EVENT_VM_FAULT, 0x1000 * i));
  CHECK(reader.pending() == 3);
  auto p = reader.poll();
  REQUIRE(p.events.size() == 3);
  for (uint32_t i = 0; i < 3; ++i) {
    CHECK(p.events[i].seq == i + 1);
    CHECK(p.events[i].type == RVGL_EVENT_VM_FAULT);
    CHECK(p.events[i].payload[0] == 0x1000ull * i);
  }
  CHECK(p.dropped_by_host == 0);
  CHECK(p.discarded == 0);
  CHECK(host.h()->event_rptr == 3);
  CHECK(reader.pending() == 0);
}

TEST_CASE("the ring index wraps and polls can be partial", "[guest][events]") {
  HostEvents host;
  EventRingReader reader(host.mem.base());
  uint32_t expect = 1;
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < 50; ++i)
      REQUIRE(host.push(RVGL_EVENT_QUEUE_HANG, expect + i));
    auto first = reader.poll(20);
    auto rest = reader.poll();
    CHECK(first.events.size() == 20);
    CHECK(rest.events.size() == 30);
    for (const auto *batch : {&first, &rest})
      for (const auto &ev : batch->events) {
        CHECK(ev.seq == expect);
        CHECK(ev.payload[0] == expect);
        ++expect;
      }
  }
  CHECK(host.h()->event_rptr == 500);
}

TEST_CASE("records the host dropped on a full ring are reported", "[guest][events]") {
  HostEvents host;
  EventRingReader reader(host.mem.base());
  for (uint32_t i = 0; i < RVGL_EVENT_RING_ENTRIES; ++i)
    REQUIRE(host.push(1, i));
  for (int i = 0; i < 7; ++i)
    CHECK_FALSE(host.push(1, 999));  // full: dropped
  auto p = reader.poll();
  CHECK(p.events.size() == RVGL_EVENT_RING_ENTRIES);
  CHECK(p.dropped_by_host == 7);
  CHECK(p.events.back().payload[0] == RVGL_EVENT_RING_ENTRIES - 1);
  REQUIRE(host.push(1, 1000));  // room again after the read index moved
  auto q = reader.poll();
  REQUIRE(q.events.size() == 1);
  CHECK(q.events[0].payload[0] == 1000);
  CHECK(q.dropped_by_host == 0);
}

TEST_CASE("the record counters may wrap around 2^32", "[guest][events]") {
  HostEvents host;
  host.h()->event_wptr = host.h()->event_rptr = 0xfffffffeu;
  EventRingReader reader(host.mem.base());
  for (int i = 0; i < 5; ++i)
    REQUIRE(host.push(2, i));
  auto p = reader.poll();
  REQUIRE(p.events.size() == 5);
  CHECK(p.discarded == 0);
  CHECK(p.events[0].seq == 0xffffffffu);
  CHECK(p.events[1].seq == 0);
  CHECK(p.events[4].seq == 3);
  CHECK(host.h()->event_rptr == 3);
}

TEST_CASE("inconsistent host indices and records are discarded, not trusted", "[guest][events]") {
  HostEvents host;
  EventRingReader reader(host.mem.base());
  SECTION("a record whose seq does not match its place") {
    for (int i = 0; i < 3; ++i)
      REQUIRE(host.push(1, i));
    auto *rec = reinterpret_cast<rvgl_event *>(host.mem.base() + RVGL_EVENT_RING_OFFSET) + 1;
    rec->seq = 77;
    auto p = reader.poll();
    CHECK(p.events.size() == 2);
    CHECK(p.discarded == 1);
    CHECK(host.h()->event_rptr == 3);
  }
  SECTION("a write index far ahead of the read index") {
    // What a host that ignored event_rptr would leave: only the newest ring's worth of records.
    for (uint32_t seq = 1000 - RVGL_EVENT_RING_ENTRIES + 1; seq <= 1000; ++seq) {
      rvgl_event ev{};
      ev.seq = seq;
      ev.type = RVGL_EVENT_VM_FAULT;
      std::memcpy(host.mem.base() + RVGL_EVENT_RING_OFFSET +
                      ((seq - 1) % RVGL_EVENT_RING_ENTRIES) * sizeof(rvgl_event),
                  &ev, sizeof(ev));
    }
    host.h()->event_wptr = 1000;
    CHECK(reader.pending() == RVGL_EVENT_RING_ENTRIES);
    auto p = reader.poll();
    REQUIRE(p.events.size() == RVGL_EVENT_RING_ENTRIES);
    CHECK(p.events.front().seq == 1000 - RVGL_EVENT_RING_ENTRIES + 1);
    CHECK(p.events.back().seq == 1000);
    CHECK(p.discarded == 1000 - RVGL_EVENT_RING_ENTRIES);
    CHECK(host.h()->event_rptr == 1000);
  }
  SECTION("a write index that went backwards") {
    for (int i = 0; i < 10; ++i)
      REQUIRE(host.push(1, i));
    REQUIRE(reader.poll().events.size() == 10);
    host.h()->event_wptr = 4;
    auto p = reader.poll();
    CHECK(p.events.size() <= RVGL_EVENT_RING_ENTRIES);
    CHECK(host.h()->event_rptr == 4);
    CHECK(reader.pending() == 0);
  }
  SECTION("the overflow counter is read as a difference") {
    host.h()->event_overflow = 0xfffffff0u;
    EventRingReader late(host.mem.base());
    host.h()->event_overflow = 5;  // wrapped
    CHECK(late.poll().dropped_by_host == 21);
  }
}
