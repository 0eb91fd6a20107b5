#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "rvgl_response_slots.h"

using rvgl::guest::ResponseSlot;
using rvgl::guest::ResponseSlotAllocator;

namespace {

bool overlaps(const ResponseSlot &a, const ResponseSlot &b) {
  return a.offset < b.offset + b.size && b.offset < a.offset + a.size;
}

}  // namespace

TEST_CASE("slots are 8-byte aligned, packed, and inside the area", "[guest][slots]") {
  ResponseSlotAllocator a(64);
  auto s1 = a.allocate(8, 1);
  auto s2 = a.allocate(13, 2);  // rounded up to 16
  auto s3 = a.allocate(40, 3);
  REQUIRE(s1);
  REQUIRE(s2);
  REQUIRE(s3);
  CHECK(s1->offset == 0);
  CHECK(s2->offset == 8);
  CHECK(s2->size == 16);
  CHECK(s3->offset == 24);
  CHECK(s3->offset + s3->size == 64);
  CHECK_FALSE(a.allocate(8, 4));  // full
  CHECK_FALSE(a.allocate(0, 5));
  CHECK_FALSE(ResponseSlotAllocator(64).allocate(72, 1));
}

TEST_CASE("space comes back from the oldest slot, and the ring wraps", "[guest][slots]") {
  ResponseSlotAllocator a(64);
  auto s1 = a.allocate(24, 1);
  auto s2 = a.allocate(24, 2);
  REQUIRE(s2);
  CHECK_FALSE(a.allocate(24, 3));  // 16 bytes left at the end

  SECTION("releasing the newest first frees nothing until the oldest goes") {
    CHECK(a.release(s2->offset, 2));
    CHECK_FALSE(a.allocate(24, 3));
    CHECK(a.release(s1->offset, 1));
    auto s3 = a.allocate(64, 3);  // everything free again: the whole area
    REQUIRE(s3);
    CHECK(s3->offset == 0);
  }
  SECTION("a slot that does not fit at the end goes to the bottom") {
    CHECK(a.release(s1->offset, 1));
    auto s3 = a.allocate(24, 3);
    REQUIRE(s3);
    CHECK(s3->offset == 0);
    CHECK_FALSE(overlaps(*s3, *s2));
    // Wrapped: only [24, 24) is free between the newest and the oldest.
    CHECK_FALSE(a.allocate(8, 4));
  }
  SECTION("a stale or double release is ignored") {
    CHECK_FALSE(a.release(s1->offset, 99));  // right offset, wrong owner
    CHECK_FALSE(a.release(4, 1));
    CHECK(a.release(s1->offset, 1));
    CHECK_FALSE(a.release(s1->offset, 1));
    CHECK(a.reserved_count() == 1);
  }
}

TEST_CASE("release_if frees the slots whose responses arrived", "[guest][slots]") {
  ResponseSlotAllocator a(256);
  for (uint32_t s = 1; s <= 8; ++s)
    REQUIRE(a.allocate(32, s));
  CHECK_FALSE(a.allocate(8, 9));
  const size_t n = a.release_if([](const ResponseSlot &s) { return s.seqno % 2 == 1; });
  CHECK(n == 4);
  CHECK(a.reserved_count() == 4);
  // Slot 1 (the oldest) is free, so 32 bytes are back at the bottom.
  auto s = a.allocate(32, 9);
  REQUIRE(s);
  CHECK(s->offset == 0);
  std::vector<uint32_t> left;
  a.for_each_reserved([&](const ResponseSlot &r) { left.push_back(r.seqno); });
  CHECK(left == std::vector<uint32_t>{2, 4, 6, 8, 9});
}

TEST_CASE("random traffic never hands out a slot that overlaps one in flight", "[guest][slots]") {
  const uint32_t area = GENERATE(64u, 200u, 57344u);
  std::mt19937 rng(area);
  ResponseSlotAllocator a(area);
  std::vector<ResponseSlot> live;
  uint32_t seqno = 0;
  size_t granted = 0, refused = 0;
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      const uint32_t size = 8 * (1 + rng() % 16);
      auto s = a.allocate(size, ++seqno);
      if (!s) {
        ++refused;
        continue;
      }
      ++granted;
      REQUIRE(s->offset % 8 == 0);
      REQUIRE(s->size >= size);
      REQUIRE(uint64_t{s->offset} + s->size <= area);
      for (const auto &l : live)
        REQUIRE_FALSE(overlaps(*s, l));
      live.push_back(*s);
    } else {
      // Responses arrive in any order.
      const size_t i = rng() % live.size();
      REQUIRE(a.release(live[i].offset, live[i].seqno));
      live.erase(live.begin() + static_cast<long>(i));
    }
  }
  CHECK(granted > 1000);
  for (const auto &l : live)
    REQUIRE(a.release(l.offset, l.seqno));
  CHECK(a.reserved_count() == 0);
  auto whole = a.allocate(area - area % 8, ++seqno);
  CHECK(whole);
  INFO("refused " << refused);
}
