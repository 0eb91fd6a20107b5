#include <catch2/catch.hpp>

#include <cerrno>

#include "memory/va_space.h"

using rvgl::VaMapping;
using rvgl::VaSpace;

TEST_CASE("VA space refuses out-of-range, misaligned and overlapping ranges", "[memory]") {
  VaSpace va(0x100000, 0x200000, 0x1000);
  CHECK(va.check_free(0x100000, 0x1000) == 0);
  CHECK(va.check_free(0x0ff000, 0x2000) == -ERANGE);               // starts below
  CHECK(va.check_free(0x1ff000, 0x2000) == -ERANGE);               // ends above
  CHECK(va.check_free(0xfffffffffffff000ull, 0x2000) == -ERANGE);  // wraps
  CHECK(va.check_free(0x100800, 0x1000) == -EINVAL);               // misaligned va
  CHECK(va.check_free(0x100000, 0x800) == -EINVAL);                // misaligned size
  CHECK(va.check_free(0x100000, 0) == -EINVAL);

  va.insert(VaMapping{0x110000, 0x4000, 0, 1, nullptr});
  CHECK(va.check_free(0x110000, 0x1000) == -EEXIST);  // same start
  CHECK(va.check_free(0x10f000, 0x2000) == -EEXIST);  // runs into it
  CHECK(va.check_free(0x113000, 0x1000) == -EEXIST);  // inside
  CHECK(va.check_free(0x113000, 0x8000) == -EEXIST);  // starts inside
  CHECK(va.check_free(0x10f000, 0x1000) == 0);        // just before
  CHECK(va.check_free(0x114000, 0x1000) == 0);        // just after
}

TEST_CASE("VA unmap needs the exact start and size", "[memory]") {
  VaSpace va(0x100000, 0x200000, 0x1000);
  va.insert(VaMapping{0x110000, 0x4000, 0, 1, nullptr});
  CHECK_FALSE(va.take(0x110000, 0x1000));
  CHECK_FALSE(va.take(0x111000, 0x3000));
  CHECK(va.take(0x110000, 0x4000));
  CHECK(va.count() == 0);
}

TEST_CASE("VA find returns the one mapping that holds a whole range", "[memory]") {
  VaSpace va(0x100000, 0x200000, 0x1000);
  va.insert(VaMapping{0x110000, 0x4000, 0, 1, nullptr});
  va.insert(VaMapping{0x114000, 0x1000, 0, 3, nullptr});  // adjacent, another mapping
  const VaMapping *m = va.find(0x110000, 0x4000);
  REQUIRE(m);
  CHECK(m->va == 0x110000);
  CHECK(va.find(0x113ff8, 8) == m);
  CHECK(va.find(0x113ff8, 16) == nullptr);  // crosses into the neighbour
  CHECK(va.find(0x114000, 0x1000)->flags == 3);
  CHECK(va.find(0x10fff8, 16) == nullptr);  // starts before
  CHECK(va.find(0x115000, 8) == nullptr);   // unmapped
  CHECK(va.find(0x110000, 0) == nullptr);
  CHECK(va.find(0xfffffffffffffff8ull, 16) == nullptr);  // wraps
}

TEST_CASE("VA mappings are found by object after single unmaps", "[memory]") {
  // Objects are only keys here: two distinct addresses stand in for two objects.
  auto a = std::shared_ptr<rvgl::MemoryObject>(reinterpret_cast<rvgl::MemoryObject *>(0x1000),
                                               [](rvgl::MemoryObject *) {});
  auto b = std::shared_ptr<rvgl::MemoryObject>(reinterpret_cast<rvgl::MemoryObject *>(0x2000),
                                               [](rvgl::MemoryObject *) {});
  VaSpace va(0x100000, 0x200000, 0x1000);
  for (uint64_t i = 0; i < 8; ++i)
    va.insert(VaMapping{0x100000 + i * 0x1000, 0x1000, 0, 1, i % 2 ? b : a});
  CHECK(va.count_of(a.get()) == 4);
  CHECK(va.take(0x100000, 0x1000));  // one of a's
  CHECK(va.take(0x101000, 0x1000));  // one of b's
  CHECK(va.count_of(a.get()) == 3);
  std::vector<VaMapping> taken;
  va.take_object(a.get(), [&](VaMapping &m) { taken.push_back(std::move(m)); });
  CHECK(taken.size() == 3);
  for (const auto &m : taken)
    CHECK(m.object == a);
  CHECK(va.count_of(a.get()) == 0);
  CHECK(va.count_of(b.get()) == 3);
  CHECK(va.count() == 3);
  size_t all = 0;
  va.take_all([&](const VaMapping &m) { all += m.object == b; });
  CHECK(all == 3);
  CHECK(va.count() == 0);
  CHECK(va.count_of(b.get()) == 0);
}
