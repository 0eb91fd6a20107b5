// rvgl-info through the stock virgl_test_server (emulator and hooks preloaded into it): the
// program prints the capset the way a guest reads it, and it is the emulated device's.
#include <catch2/catch.hpp>

#include "capset_source.h"
#include "info_expectations.h"
#include "run_program.h"
#include "vtest_server.h"

using namespace rvgl;
using namespace rvgl::tools_test;
using json = nlohmann::json;

TEST_CASE("info prints the capset through vtest", "[tools][info][vtest]") {
  const std::string prog = path_from_env("RVGL_INFO_BIN");
  std::string why;
  if (!e2e::e2e_configured(&why) || prog.empty()) {
    WARN("not configured (run through meson test): " << why);
    return;
  }
  e2e::VtestServer server;

  // The library path first: what a guest reads over this socket.
  auto loaded =
      info::load_capset_vtest(server.socket_path(), RVGL_CAPSET_ID, std::chrono::seconds(10));
  INFO("server output:\n" << server.log());
  REQUIRE(loaded.ok());
  CHECK(loaded->origin.source == "vtest:" + server.socket_path());

  const auto js = run_program({prog, "--vtest", server.socket_path(), "--json"});
  INFO(js.err);
  REQUIRE(js.exit_status == 0);
  const json j = json::parse(js.out);
  check_json_matches_capset(j, loaded->capset);
  check_json_matches_device(j, query_device_facts());
  CHECK(j["origin"]["source"] == "vtest:" + server.socket_path());

  const auto text = run_program({prog, "--vtest", server.socket_path()});
  REQUIRE(text.exit_status == 0);
  CHECK(text.out.find("from vtest:" + server.socket_path()) != std::string::npos);
  CHECK(text.out.find(j["capset"]["marketing_name"].get<std::string>()) != std::string::npos);
  CHECK(text.out.find(j["decoded"]["gfx_ip"].get<std::string>()) != std::string::npos);
  CHECK(server.running());

  SECTION("a socket nobody listens on fails cleanly") {
    const auto bad =
        run_program({prog, "--vtest", server.socket_path() + ".absent", "--timeout-ms", "500"});
    CHECK(bad.exit_status == 1);
    CHECK(!bad.err.empty());
  }
}
