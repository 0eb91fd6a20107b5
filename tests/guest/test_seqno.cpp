#include <catch2/catch.hpp>

#include "rvgl_seqno.h"

using rvgl::guest::seqno_after;
using rvgl::guest::SeqnoCounter;

TEST_CASE("seqno_after is serial-number order", "[guest][seqno]") {
  CHECK(seqno_after(1, 0));
  CHECK_FALSE(seqno_after(0, 0));
  CHECK_FALSE(seqno_after(4, 5));
  CHECK(seqno_after(0, 0xffffffffu));  // wraps forward
  CHECK(seqno_after(3, 0xfffffff0u));
  CHECK_FALSE(seqno_after(0xfffffff0u, 3));
  CHECK(seqno_after(0x7fffffffu, 0));  // up to 2^31 - 1 ahead
  CHECK_FALSE(seqno_after(0x80000000u, 0));
}

TEST_CASE("the counter starts after the host's initial 0 and never issues 0", "[guest][seqno]") {
  SeqnoCounter fresh;
  CHECK(fresh.next() == 1);
  CHECK(fresh.next() == 2);

  SeqnoCounter c(0xfffffffdu);
  const uint32_t a = c.next(), b = c.next(), d = c.next(), e = c.next();
  CHECK(a == 0xfffffffeu);
  CHECK(b == 0xffffffffu);
  CHECK(d == 1);  // 0 skipped
  CHECK(e == 2);
  CHECK(seqno_after(b, a));
  CHECK(seqno_after(d, b));
  CHECK(seqno_after(e, d));
  CHECK(c.last() == 2);
}
