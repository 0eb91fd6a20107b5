// The vtest transport against Debian's stock virgl_test_server (virglrenderer 0.10.4): the parts
// that work without a ROCm context. The server is given by RVGL_TEST_VTEST_SERVER and the
// no-EGL shim by RVGL_TEST_VTEST_SHIM (meson sets both); without them the tests say so and pass.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "rvgl_vtest_transport.h"
#include "stock_vtest_server.h"

using namespace rvgl::guest;
using rvgl::guest::test::StockVtestServer;

namespace {

constexpr uint32_t kVenusCapset = 4;  // VIRGL_RENDERER_CAPSET_VENUS

std::string env(const char *name) {
  const char *v = std::getenv(name);
  return v ? v : "";
}

VtestOptions quick() {
  VtestOptions o;
  o.client_name = "rvgl-guest-test";
  o.reply_timeout = std::chrono::seconds(10);
  return o;
}

}  // namespace

TEST_CASE("stock server as shipped: no EGL here means no clients, reported cleanly",
          "[guest][vtest][stock]") {
  const std::string bin = env("RVGL_TEST_VTEST_SERVER");
  if (bin.empty()) {
    WARN("RVGL_TEST_VTEST_SERVER not set: skipped");
    return;
  }
  StockVtestServer server(bin, "");
  REQUIRE(server.started());
  REQUIRE(server.wait_listening(5000));
  const auto t0 = std::chrono::steady_clock::now();
  auto t = VtestTransport::connect(server.socket_path(), quick());
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  if (t) {
    WARN("the stock server initialised its renderer here (EGL works): handshake succeeded");
    CHECK((*t)->protocol_version() == 3);
  } else {
    // vtest_server.c initialises the renderer right after accepting; when that fails the
    // client is dropped before its first command is read.
    INFO(t.error().message << "\nserver log:\n" << server.log());
    CHECK((t.code() == -ECONNRESET || t.code() == -EPIPE));
    CHECK(server.log().find("failed to initialise renderer") != std::string::npos);
  }
}

TEST_CASE("stock server with the no-EGL shim: handshake, capsets, context, blobs, syncs",
          "[guest][vtest][stock]") {
  const std::string bin = env("RVGL_TEST_VTEST_SERVER");
  const std::string shim = env("RVGL_TEST_VTEST_SHIM");
  if (bin.empty() || shim.empty()) {
    WARN("RVGL_TEST_VTEST_SERVER / RVGL_TEST_VTEST_SHIM not set: skipped");
    return;
  }
  StockVtestServer server(bin, shim);
  REQUIRE(server.started());
  REQUIRE(server.wait_listening(5000));

  auto conn = VtestTransport::connect(server.socket_path(), quick());
  INFO("server log:\n" << server.log());
  REQUIRE(conn);
  auto &t = **conn;
  CHECK(t.protocol_version() == 3);

  // No ROCm capset in the stock library: GET_CAPSET answers valid = 0, and the link lives on.
  CHECK(t.get_capset(RVGL_CAPSET_ID, RVGL_CAPSET_VERSION).code() == -ENOENT);
  auto venus = t.get_capset(kVenusCapset, 0);
  REQUIRE(venus);
  CHECK_FALSE(venus->empty());
  CHECK(t.get_capset(kVenusCapset, 1).code() == -ENOENT);  // above its max version
  auto timelines = t.max_timeline_count();
  REQUIRE(timelines);
  CHECK(*timelines == 64);

  SECTION("CONTEXT_INIT for a capset nobody serves fails at the probe, cleanly") {
    auto s = t.init_context(RVGL_CAPSET_ID, RVGL_RING_COUNT);
    REQUIRE_FALSE(s);
    CHECK(s.code() == -ECONNRESET);
    CHECK(t.connection_failed());
  }

  SECTION("a real context: GUEST blob through the server's memfd, fences, syncs") {
    REQUIRE(t.init_context(kVenusCapset, 1));
    std::vector<uint8_t> data(4096);
    for (size_t i = 0; i < data.size(); ++i)
      data[i] = static_cast<uint8_t>(i ^ 0x5a);
    BlobParams p;
    p.blob_mem = RVGL_BLOB_MEM_GUEST;
    p.blob_flags = RVGL_BLOB_FLAG_USE_MAPPABLE;
    p.size = 16384;
    p.guest_memory = data;
    auto blob = t.create_blob(p);
    REQUIRE(blob);
    CHECK(blob->res_id != 0);
    REQUIRE(blob->memory.size() == 16384);
    CHECK(std::memcmp(blob->memory.data(), data.data(), data.size()) == 0);

    // Without a ring index the sync is signalled once the server has taken the buffer.
    auto cpu = t.submit({{}, std::nullopt, true});
    REQUIRE(cpu);
    auto w = t.wait(*cpu, std::chrono::seconds(10));
    REQUIRE(w);
    CHECK(*w);
    // Ring 0 goes through the context's own fence (venus retires ring 0 via context_poll).
    auto ring0 = t.submit({{}, 0u, true});
    REQUIRE(ring0);
    auto w0 = t.wait(*ring0, std::chrono::seconds(10));
    REQUIRE(w0);
    CHECK(*w0);

    auto id = t.sync_create(5);
    REQUIRE(id);
    REQUIRE(t.sync_write(*id, 9));
    auto v = t.sync_read(*id);
    REQUIRE(v);
    CHECK(*v == 9);
    REQUIRE(t.sync_unref(*id));
    REQUIRE(t.unref_blob(std::move(*blob)));
    CHECK(t.get_capset(kVenusCapset, 0).ok());  // still in step after the no-reply commands

    // A ring venus does not have: the context refuses the fence and vtest drops the client;
    // the transport reports it at the next reply instead of hanging.
    auto bad = t.submit({{}, 5u, true});
    REQUIRE(bad);
    auto wb = t.wait(*bad, std::chrono::seconds(10));
    REQUIRE_FALSE(wb);
    // EPIPE when the drop beat our SYNC_WAIT out, ECONNRESET when it came while we read.
    CHECK((wb.code() == -ECONNRESET || wb.code() == -EPIPE));
    CHECK(t.connection_failed());
  }
}
