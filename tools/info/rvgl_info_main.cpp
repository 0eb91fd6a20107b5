// rvgl-info: what a host's ROCm capset says — protocol, features, limits and device facts — read
// the way a guest reads it (over vtest) or the way a VMM does (the virglrenderer API in-process).
// Exit status: 0 when a capset was read and printed, 1 when none could be read, 2 on bad usage.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <chrono>

#include "capset_report.h"
#include "capset_source.h"

int main(int argc, char **argv) {
  CLI::App app{"Print the rocm-virgl capset (virtio-gpu capset ROCM) a host offers", "rvgl-info"};
  std::string socket;
  bool in_process = false;
  bool json = false;
  uint32_t capset_id = RVGL_CAPSET_ID;
  unsigned timeout_ms = 10000;
  auto *vt = app.add_option("--vtest", socket, "read it from the vtest server listening on SOCKET")
                 ->type_name("SOCKET");
  auto *ip = app.add_flag("--in-process", in_process,
                          "read it through the virglrenderer API in this process (preload "
                          "librvgl_emu.so for the emulated GPU, or set RVGL_RENDER_NODE)");
  vt->excludes(ip);
  ip->excludes(vt);
  app.add_flag("--json", json, "print JSON instead of text");
  app.add_option("--capset-id", capset_id, "capset id the host answers on (RVGL_CAPSET_ID there)")
      ->capture_default_str();
  app.add_option("--timeout-ms", timeout_ms, "bound on each vtest reply")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (socket.empty() && !in_process) {
    fmt::print(stderr, "rvgl-info: give --vtest SOCKET or --in-process\n{}", app.help());
    return 2;
  }

  auto loaded = in_process ? rvgl::info::load_capset_in_process(capset_id)
                           : rvgl::info::load_capset_vtest(socket, capset_id,
                                                           std::chrono::milliseconds(timeout_ms));
  if (!loaded) {
    fmt::print(stderr, "rvgl-info: {} ({})\n", loaded.error().message, loaded.error().code);
    return 1;
  }
  if (json)
    fmt::print("{}\n", rvgl::info::capset_json(loaded->capset, loaded->origin).dump(2));
  else
    fmt::print("{}", rvgl::info::capset_text(loaded->capset, loaded->origin));
  return 0;
}
