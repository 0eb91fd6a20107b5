// SPM through the stock virgl_test_server (issues 6 and 7): the demo's spm mode records a stream
// into guest memory and exports it; two guests contend for the SPM and a disconnect frees it.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "e2e_client_steps.h"
#include "spm_capture.h"
#include "spm_recording.h"

using namespace rvgl::e2e;
using rvgl::demo::ComputeClient;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

constexpr uint32_t kSpmRing = 9;

// A directory for one test's output, removed with it.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "rvgl-e2e-spm-XXXXXX").string();
    REQUIRE(mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::vector<std::vector<std::string>> read_csv(const fs::path &p) {
  std::ifstream f(p);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(f, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ','))
      cells.push_back(cell);
    rows.push_back(std::move(cells));
  }
  return rows;
}

// The CSV the spm mode wrote: a header, one row per sample, the same columns on every row, and
// timestamps rising on each XCC.
void check_csv(const fs::path &p, uint64_t samples) {
  const auto rows = read_csv(p);
  REQUIRE(rows.size() == samples + 1);
  const auto &head = rows[0];
  REQUIRE(head.size() > 3);
  CHECK(head[0] == "xcc");
  CHECK(head[1] == "timestamp");
  CHECK(head[2] == "time_us");
  std::map<uint64_t, uint64_t> last;  // xcc -> timestamp
  size_t bad_width = 0, not_rising = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].size() != head.size()) {
      ++bad_width;
      continue;
    }
    const uint64_t xcc = std::stoull(rows[i][0]), ts = std::stoull(rows[i][1]);
    auto it = last.find(xcc);
    if (it != last.end() && ts <= it->second) ++not_rising;
    last[xcc] = ts;
  }
  CHECK(bad_width == 0);
  CHECK(not_rising == 0);
}

// The trace: valid JSON whose counter events ("ph": "C") make one track per (XCC, counter), each
// with a numeric value and rising timestamps. A track is a name within a process (one per XCC).
void check_trace(const fs::path &p, uint64_t samples, uint32_t xccs, size_t counters) {
  std::ifstream f(p);
  const nlohmann::json doc = nlohmann::json::parse(f);  // throws (fails the test) if invalid
  std::map<std::pair<int, std::string>, double> last_ts;
  size_t events = 0, not_rising = 0, no_value = 0;
  for (const auto &e : doc.at("traceEvents")) {
    if (e.at("ph") != "C") continue;
    ++events;
    const std::pair<int, std::string> track{e.at("pid"), e.at("name")};
    const double ts = e.at("ts");
    if (!e.at("args").contains("value") || !e.at("args").at("value").is_number()) ++no_value;
    auto it = last_ts.find(track);
    if (it != last_ts.end() && ts <= it->second) ++not_rising;
    last_ts[track] = ts;
  }
  CHECK(events == samples * counters);
  CHECK(last_ts.size() == xccs * counters);
  CHECK(no_value == 0);
  CHECK(not_rising == 0);
}

// The XCCs behind the emulated node for a profile, as the emulator presents them: the
// partition's compute_partition_config/xcc/num_inst (amdgpu_xcp.c), read by a program running
// under the emulator itself; a part without partitions has no such file and one XCC.
uint32_t emulated_xccs(const std::string &profile) {
  const char *preload = std::getenv("RVGL_E2E_PRELOAD");
  REQUIRE(preload != nullptr);
  const std::string emu = std::string(preload).substr(0, std::string(preload).find(':'));
  const std::string cmd = "env LD_PRELOAD=" + emu + " RVGL_EMU_PROFILE=" + profile +
                          " cat /sys/class/drm/renderD128/device/compute_partition_config/xcc/"
                          "num_inst 2>/dev/null";
  FILE *p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  unsigned n = 0;
  const bool found = std::fscanf(p, "%u", &n) == 1;
  pclose(p);
  return found ? n : 1;
}

// Runs a program, its output into `log`; returns its exit status (-1 if it did not exit).
int run_program(const std::vector<std::string> &args, const fs::path &log) {
  std::vector<char *> argv;
  for (const auto &a : args)
    argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid;
  const int err = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string slurp(const fs::path &p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("the demo's spm mode records SPM into a guest blob and exports CSV and trace JSON",
          "[e2e][spm]") {
  const std::string profile = GENERATE("gfx1100", "gfx942");
  INFO("RVGL_EMU_PROFILE=" << profile);
  ServerOptions so;
  so.extra_env = {"RVGL_EMU_PROFILE=" + profile};
  VtestServer server(so);
  auto c = connect(server, "spm-capture");
  CHECK(c->capset().num_xcc == emulated_xccs(profile));
  REQUIRE((c->capset().features & RVGL_FEATURE_SPM) != 0);
  TempDir out;
  rvgl::demo::SpmCaptureOptions o;
  o.buffers = 3;
  o.buffer_bytes = 16 * 1024;
  o.out_dir = out.path.string();
  const auto cap = ok(rvgl::demo::capture_spm(*c, o), "capture_spm");

  REQUIRE(cap.buffers.size() == o.buffers);
  CHECK(cap.dest_bytes <= o.buffer_bytes);
  for (const auto &b : cap.buffers) {
    CHECK(b.bytes_copied > 0);
    CHECK(b.decoded_bytes == b.bytes_copied);  // the slice headers agree with the response
    CHECK(b.samples > 0);
  }
  CHECK(cap.stats.slices == uint64_t{o.buffers} * c->capset().num_xcc);
  CHECK(cap.stats.timestamp_regressions == 0);
  check_csv(cap.csv_path, cap.stats.samples);
  check_trace(cap.trace_path, cap.stats.samples, cap.layout.num_xcc, 8);

  // The recording holds the buffers exactly as retired: rvgl-spm reads it back.
  rvgl::spm::SpmRecording rec;
  std::string err;
  REQUIRE(rvgl::spm::read_recording(cap.recording_path, &rec, &err));
  CHECK(rec.buffers.size() == o.buffers);
  CHECK(rec.header.num_xcc == c->capset().num_xcc);

  // The SPM went back: another capture (with other counters) can take it at once.
  TempDir out2;
  o.out_dir = out2.path.string();
  o.buffers = 1;
  o.counters = {0, 5};
  o.write_recording = false;
  const auto again = ok(rvgl::demo::capture_spm(*c, o), "capture_spm again");
  CHECK(again.recording_path.empty());
  check_trace(again.trace_path, again.stats.samples, again.layout.num_xcc, 2);
  CHECK(c->session().shared_page().async_error() == 0);
}

TEST_CASE("the spm mode refuses what it cannot record", "[e2e][spm]") {
  TempDir out;
  rvgl::demo::SpmCaptureOptions o;
  o.out_dir = out.path.string();
  SECTION("a host whose kernel has no profiler offers no SPM") {
    ServerOptions so;
    so.extra_env = {"RVGL_EMU_FAIL=PROFILER:1+:ENOTTY"};
    VtestServer server(so);
    auto c = connect(server, "spm-absent");
    CHECK((c->capset().features & RVGL_FEATURE_SPM) == 0);
    CHECK(rvgl::demo::capture_spm(*c, o).code() == -ENODEV);
  }
  SECTION("a buffer too small for one sample per XCC") {
    VtestServer server;
    auto c = connect(server, "spm-tiny");
    o.buffer_bytes = 64;
    CHECK(rvgl::demo::capture_spm(*c, o).code() == -EINVAL);
    o.buffer_bytes = 16 * 1024;  // nothing was left held: a proper capture works
    o.buffers = 1;
    CHECK(rvgl::demo::capture_spm(*c, o).ok());
  }
}

TEST_CASE("rvgl-demo spm writes its files and exits 0", "[e2e][spm]") {
  const char *demo = std::getenv("RVGL_E2E_DEMO");
  if (!demo || !*demo) {
    WARN("skipped: RVGL_E2E_DEMO is not set (run through meson test)");
    return;
  }
  VtestServer server;
  TempDir out;
  const fs::path log = out.path / "demo.log";
  const int status = run_program({demo, "--socket", server.socket_path(), "spm", "--buffers", "2",
                                  "--buffer-kib", "16", "--out-dir", out.path.string()},
                                 log);
  INFO("demo output:\n" << slurp(log) << "\nserver output:\n" << server.log());
  REQUIRE(status == 0);
  CHECK(slurp(log).find("result   : PASS") != std::string::npos);
  const auto rows = read_csv(out.path / "spm-samples.csv");
  CHECK(rows.size() > 2);
  CHECK(fs::file_size(out.path / "spm-trace.json") > 0);
  rvgl::spm::SpmRecording rec;
  std::string err;
  REQUIRE(rvgl::spm::read_recording((out.path / "spm-recording.bin").string(), &rec, &err));
  CHECK(rec.buffers.size() == 2);
}

TEST_CASE("two guests contend for the SPM; the holder's disconnect frees it", "[e2e][spm]") {
  const bool one_process = GENERATE(false, true);
  INFO((one_process ? "--no-fork --multi-clients: the host arbiter decides"
                    : "forked per client: the kernel's (emulator's) exclusivity decides"));
  ServerOptions so;
  so.one_process = one_process;
  VtestServer server(so);
  auto holder = connect(server, "spm-holder");
  auto waiter = connect(server, "spm-waiter");
  REQUIRE((waiter->capset().features & RVGL_FEATURE_SPM) != 0);

  REQUIRE(spm_acquire(*holder, kSpmRing) == 0);
  CHECK(spm_acquire(*waiter, kSpmRing) == -EBUSY);
  TempDir out;
  rvgl::demo::SpmCaptureOptions o;
  o.out_dir = out.path.string();
  CHECK(rvgl::demo::capture_spm(*waiter, o).code() == -EBUSY);

  holder.reset();  // the connection closes; the holder never sent SPM_RELEASE

  // The server notices the closed socket and tears the context down on its own time.
  const auto give_up = Clock::now() + std::chrono::seconds(15);
  int r = -EBUSY;
  while (r == -EBUSY && Clock::now() < give_up) {
    r = spm_acquire(*waiter, kSpmRing);
    if (r == -EBUSY) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  INFO("server output:\n" << server.log());
  REQUIRE(r == 0);
  CHECK(spm_acquire(*waiter, kSpmRing) == -EALREADY);
  CHECK(spm_release(*waiter) == 0);
  CHECK(server.running());
}
