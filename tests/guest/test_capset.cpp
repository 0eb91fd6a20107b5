#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <vector>

#include "rvgl_capset.h"

using rvgl::guest::parse_capset;

namespace {

rvgl_capset good() {
  rvgl_capset c{};
  c.wire_format_version = RVGL_WIRE_FORMAT_VERSION;
  c.protocol_major = RVGL_PROTOCOL_MAJOR;
  c.protocol_minor = 3;
  c.features = RVGL_FEATURE_USERPTR | RVGL_FEATURE_SPM;
  c.shmem_size = RVGL_SHMEM_SIZE;
  c.max_submit_bytes = 1 << 20;
  c.num_cu = 96;
  std::memcpy(c.marketing_name, "Emulated GPU", 13);
  return c;
}

std::vector<uint8_t> bytes_of(const rvgl_capset &c, size_t extra = 0) {
  std::vector<uint8_t> b(sizeof(c) + extra, 0xee);
  std::memcpy(b.data(), &c, sizeof(c));
  return b;
}

}  // namespace

TEST_CASE("a v1 capset is accepted and read field for field", "[guest][capset]") {
  auto r = parse_capset(bytes_of(good()));
  REQUIRE(r);
  CHECK(r->num_cu == 96);
  CHECK(r->protocol_minor == 3);
  CHECK(std::string(r->marketing_name) == "Emulated GPU");
  CHECK(rvgl::guest::has_feature(*r, RVGL_FEATURE_SPM));
  CHECK_FALSE(rvgl::guest::has_feature(*r, RVGL_FEATURE_USER_QUEUES));
  CHECK(parse_capset(bytes_of(good(), 64)).ok());  // a future, longer capset
}

TEST_CASE("capsets this library cannot speak are refused", "[guest][capset]") {
  auto c = good();
  SECTION("short") {
    auto b = bytes_of(c);
    b.resize(sizeof(rvgl_capset) - 8);
    CHECK(parse_capset(b).code() == -EPROTO);
    CHECK(parse_capset({}).code() == -EPROTO);
  }
  SECTION("another wire format") {
    c.wire_format_version = 2;
    CHECK(parse_capset(bytes_of(c)).code() == -EPROTONOSUPPORT);
  }
  SECTION("another protocol major") {
    c.protocol_major = 2;
    CHECK(parse_capset(bytes_of(c)).code() == -EPROTONOSUPPORT);
  }
  SECTION("another shared page size") {
    c.shmem_size = 4096;
    CHECK(parse_capset(bytes_of(c)).code() == -EPROTO);
  }
}

TEST_CASE("the marketing name is terminated whatever the host sent", "[guest][capset]") {
  auto c = good();
  std::memset(c.marketing_name, 'A', sizeof(c.marketing_name));
  auto r = parse_capset(bytes_of(c));
  REQUIRE(r);
  CHECK(std::strlen(r->marketing_name) == RVGL_MARKETING_NAME_SIZE - 1);
}
