// rvgl-trace: a capture file (RVGL_CAPTURE_DIR, docs/capture-format.md) as readable lines, or as
// JSON with one object per line. Exit status: 0 when the whole file decoded cleanly, 1 when
// problems (malformed or truncated data, unknown commands) were reported, 2 when the file could
// not be read.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "trace_decode.h"

int main(int argc, char **argv) {
  CLI::App app{"Decode a rocm-virgl capture file", "rvgl-trace"};
  std::string path;
  bool json = false;
  bool summary = true;
  app.add_option("file", path, "capture file (rvgl-capture-<pid>-ctx<id>[-<n>].bin)")->required();
  app.add_flag("--json", json, "one JSON object per line instead of text");
  app.add_flag("!--no-summary", summary, "leave out the closing count of records and problems");
  CLI11_PARSE(app, argc, argv);

  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fmt::print(stderr, "rvgl-trace: cannot open {}: {}\n", path, std::strerror(errno));
    return 2;
  }
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  if (in.bad()) {
    fmt::print(stderr, "rvgl-trace: cannot read {}\n", path);
    return 2;
  }

  const auto stats = rvgl::trace::decode_capture(bytes, [&](const nlohmann::ordered_json &e) {
    if (json)
      fmt::print("{}\n", e.dump());
    else
      fmt::print("{}", rvgl::trace::event_text(e));
  });
  if (summary) {
    if (json)
      fmt::print("{}\n", nlohmann::ordered_json{{"type", "summary"},
                                                {"records", stats.records},
                                                {"requests", stats.requests},
                                                {"responses", stats.responses},
                                                {"dones", stats.dones},
                                                {"unknown_commands", stats.unknown_commands},
                                                {"problems", stats.problems}}
                             .dump());
    else
      fmt::print("-- {} records: {} requests, {} responses, {} submits done; {} problems\n",
                 stats.records, stats.requests, stats.responses, stats.dones, stats.problems);
  }
  return stats.problems ? 1 : 0;
}
