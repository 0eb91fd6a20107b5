#include <catch2/catch.hpp>

#include "memory/handle_table.h"

TEST_CASE("handles are >= 1, bounded, and unknown ones are refused", "[memory]") {
  rvgl::HandleTable<int> t(2);
  const uint32_t a = t.insert(std::make_shared<int>(1));
  const uint32_t b = t.insert(std::make_shared<int>(2));
  CHECK(a >= 1);
  CHECK(b >= 1);
  CHECK(a != b);
  CHECK(t.insert(std::make_shared<int>(3)) == 0);  // capacity reached
  CHECK(t.get(0) == nullptr);
  CHECK(t.get(3) == nullptr);
  CHECK(t.get(0xffffffffu) == nullptr);
  CHECK(*t.get(a) == 1);
  CHECK(t.remove(a));
  CHECK(t.get(a) == nullptr);
  CHECK_FALSE(t.remove(a));  // double free
  CHECK(t.size() == 1);
  CHECK(t.insert(std::make_shared<int>(4)) != 0);
}
