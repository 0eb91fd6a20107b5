// rvgl-info in-process: the capset read through the virglrenderer API (our hooks in front of the
// real library, the emulator linked in), as JSON, holds every field of the struct and the facts
// the emulated device reports; the program does the same with librvgl_emu.so preloaded.
#include <catch2/catch.hpp>

#include <filesystem>

#include "capset_source.h"
#include "info_expectations.h"
#include "run_program.h"

using namespace rvgl;
using namespace rvgl::tools_test;
using json = nlohmann::json;

TEST_CASE("info: the in-process capset as JSON matches the emulated device", "[tools][info]") {
  auto loaded = info::load_capset_in_process(RVGL_CAPSET_ID);
  INFO((loaded ? std::string() : loaded.error().message));
  REQUIRE(loaded.ok());
  CHECK(loaded->origin.capset_id == RVGL_CAPSET_ID);
  CHECK(loaded->origin.capset_version == RVGL_CAPSET_VERSION);
  CHECK(loaded->origin.capset_size == sizeof(rvgl_capset));

  const json j = json::parse(info::capset_json(loaded->capset, loaded->origin).dump());
  check_json_matches_capset(j, loaded->capset);
  check_json_matches_device(j, query_device_facts());
  CHECK(j["origin"]["source"] == "in-process");
}

TEST_CASE("info: an absent capset id is an error, not a report", "[tools][info]") {
  auto loaded = info::load_capset_in_process(RVGL_CAPSET_ID + 1000);
  REQUIRE(!loaded.ok());
  CHECK(loaded.error().code == -ENOENT);
}

TEST_CASE("info: the program prints the same with the emulator preloaded",
          "[tools][info][preload]") {
  const std::string prog = path_from_env("RVGL_INFO_BIN");
  const std::string emu = path_from_env("RVGL_EMU_PRELOAD");
  if (prog.empty() || emu.empty()) {
    WARN("RVGL_INFO_BIN / RVGL_EMU_PRELOAD not set (run through meson test): skipped");
    return;
  }
  auto loaded = info::load_capset_in_process(RVGL_CAPSET_ID);
  REQUIRE(loaded.ok());
  const std::vector<std::string> env = {"LD_PRELOAD=" + emu, "RVGL_EMU_TRACE=0"};

  const auto js = run_program({prog, "--in-process", "--json"}, env);
  INFO(js.err);
  REQUIRE(js.exit_status == 0);
  const json j = json::parse(js.out);
  check_json_matches_capset(j, loaded->capset);

  const auto text = run_program({prog, "--in-process"}, env);
  REQUIRE(text.exit_status == 0);
  CHECK(text.out.find(j["capset"]["marketing_name"].get<std::string>()) != std::string::npos);
  for (const auto &[name, value] : j["capset"].items()) {
    if (name == "pad0" || name == "reserved") continue;  // shown only when not zero
    INFO(name);
    CHECK(text.out.find("  " + name + " ") != std::string::npos);
  }
  for (const auto &f : j["decoded"]["features"])
    CHECK(text.out.find(f.get<std::string>()) != std::string::npos);

  SECTION("without a device the program says so and fails") {
    // A node that does not exist, whatever GPUs this machine has.
    const std::string node =
        (std::filesystem::temp_directory_path() / "rvgl-info-test-no-such-node").string();
    const auto none =
        run_program({prog, "--in-process"}, {"LD_PRELOAD=", "RVGL_RENDER_NODE=" + node});
    CHECK(none.exit_status == 1);
    CHECK(none.out.empty());
    CHECK(none.err.find("not offered") != std::string::npos);
  }
  SECTION("no source is a usage error") {
    CHECK(run_program({prog}, env).exit_status == 2);
  }
}
