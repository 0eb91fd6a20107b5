#include <catch2/catch.hpp>

#include <cerrno>

#include "memory/usage.h"

using rvgl::Charge;
using rvgl::Usage;

TEST_CASE("quotas refuse what would exceed them and release on drop", "[memory]") {
  auto u = std::make_shared<Usage>(2, 1000, 500, 100, 50);
  CHECK(u->charge(Usage::Pool::kVram, 1001) == -ENOSPC);
  CHECK(u->charge(Usage::Pool::kDoorbell, 51) == -ENOSPC);
  CHECK(u->charge(Usage::Pool::kVram, UINT64_MAX) == -ENOSPC);
  {
    REQUIRE(u->charge(Usage::Pool::kVram, 600) == 0);
    Charge c1(u, Usage::Pool::kVram, 600);
    CHECK(u->charge(Usage::Pool::kVram, 401) == -ENOSPC);
    REQUIRE(u->charge(Usage::Pool::kGtt, 10) == 0);
    Charge c2(u, Usage::Pool::kGtt, 10);
    CHECK(u->charge(Usage::Pool::kUserptr, 1) == -ENOSPC);  // object count
    CHECK(u->snapshot().objects == 2);
  }
  const auto s = u->snapshot();
  CHECK(s.objects == 0);
  CHECK(s.vram_bytes == 0);
  CHECK(s.gtt_bytes == 0);
}
