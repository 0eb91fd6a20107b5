// Issue 17: rvgl-serve from a tree installed with `meson install --destdir`. It starts the stock
// virgl_test_server with the installed hooks and emulator, the installed demo runs against the
// socket it printed, and a stop (Ctrl-C's SIGINT, SIGTERM, or the server dying) leaves no process
// and no socket behind. Paths come from meson test: RVGL_MESON, RVGL_BUILD_ROOT and the install
// directories RVGL_INSTALL_BINDIR / RVGL_INSTALL_LIBDIR (absolute, before DESTDIR).
#include <catch2/catch.hpp>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "../support/spawn_args.h"
#include "run_program.h"

using rvgl::tools_test::path_from_env;
using rvgl::tools_test::run_program;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// The tree `meson install --destdir` made, once per test process.
struct InstalledTree {
  std::string root, bin, lib, error;
  InstalledTree() {
    std::string t = (fs::temp_directory_path() / "rvgl-install-XXXXXX").string();
    if (!mkdtemp(t.data())) {
      error = "mkdtemp failed";
      return;
    }
    root = t;
    const auto r =
        run_program({path_from_env("RVGL_MESON"), "install", "-C", path_from_env("RVGL_BUILD_ROOT"),
                     "--no-rebuild", "--quiet", "--destdir", root});
    if (r.exit_status != 0) error = "meson install failed:\n" + r.out + r.err;
    bin = root + path_from_env("RVGL_INSTALL_BINDIR");
    lib = root + path_from_env("RVGL_INSTALL_LIBDIR");
  }
  ~InstalledTree() {
    std::error_code ec;
    if (!root.empty()) fs::remove_all(root, ec);
  }
};

const InstalledTree &tree() {
  static InstalledTree t;
  return t;
}

bool configured(std::string *why) {
  for (const char *v :
       {"RVGL_MESON", "RVGL_BUILD_ROOT", "RVGL_INSTALL_BINDIR", "RVGL_INSTALL_LIBDIR"})
    if (path_from_env(v).empty()) {
      *why = std::string(v) + " is not set (run through meson test)";
      return false;
    }
  return true;
}

// Live (non-zombie) processes of group `pgid`, and processes whose command line names `text`.
std::vector<pid_t> leftovers(pid_t pgid, const std::string &text) {
  std::vector<pid_t> out;
  DIR *d = opendir("/proc");
  REQUIRE(d);
  while (const dirent *e = readdir(d)) {
    char *end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end) continue;
    const std::string base = std::string("/proc/") + e->d_name;
    std::ifstream st(base + "/stat");
    std::string stat;
    std::getline(st, stat);
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    char state = 0;
    long ppid = 0, pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (state == 'Z' || state == 'X') continue;
    std::ifstream cl(base + "/cmdline", std::ios::binary);
    std::stringstream cmd;
    cmd << cl.rdbuf();
    if (pgrp == pgid || cmd.str().find(text) != std::string::npos)
      out.push_back(static_cast<pid_t>(pid));
  }
  closedir(d);
  return out;
}

// rvgl-serve running in the background, its stdout read line by line through a pipe.
class Serve {
 public:
  explicit Serve(const std::vector<std::string> &extra) {
    const InstalledTree &t = tree();
    state_ = t.root + "/emu-state-" + std::to_string(counter_++);
    std::vector<std::string> args = {t.bin + "/rvgl-serve", "--state-dir", state_};
    args.insert(args.end(), extra.begin(), extra.end());
    int fds[2];
    REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
    out_ = fds[0];
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    std::vector<char *> argv = rvgl::test::c_string_array(args);
    const int err = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    REQUIRE(err == 0);
  }
  ~Serve() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(out_);
  }
  // Reads until a line matches `re` (true, its groups in *m) or the output ends or 20 s pass.
  bool wait_for(const std::regex &re, std::smatch *m) {
    const auto give_up = Clock::now() + std::chrono::seconds(20);
    for (;;) {
      size_t nl;
      while ((nl = buf_.find('\n')) != std::string::npos) {
        lines_.push_back(buf_.substr(0, nl));
        buf_.erase(0, nl + 1);
        if (std::regex_search(lines_.back(), *m, re)) return true;
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now());
      if (left.count() <= 0) return false;
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      char chunk[4096];
      const ssize_t n = read(out_, chunk, sizeof(chunk));
      if (n <= 0) return false;
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }
  // Waits for the program to exit (up to 20 s); its exit status, or -1.
  int wait_exit() {
    const auto give_up = Clock::now() + std::chrono::seconds(20);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > give_up) return -1;
      usleep(10000);
    }
    pid_ = -1;
    read_to_end();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // The rest of its output, up to EOF (bounded: 20 s).
  void read_to_end() {
    const auto give_up = Clock::now() + std::chrono::seconds(20);
    char chunk[4096];
    for (;;) {
      pollfd p{out_, POLLIN, 0};
      if (Clock::now() > give_up || poll(&p, 1, 1000) < 0) return;
      if (p.revents == 0) continue;
      const ssize_t n = read(out_, chunk, sizeof(chunk));
      if (n <= 0) return;
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }
  pid_t pid() const { return pid_; }
  std::string output() const {
    std::string s;
    for (const auto &l : lines_)
      s += l + "\n";
    return s + buf_;
  }

 private:
  static inline int counter_ = 0;
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buf_, state_;
  std::vector<std::string> lines_;
};

// Starts rvgl-serve; the server's pid and socket as printed.
struct Started {
  pid_t server = -1;
  std::string socket;
};
Started started(Serve &s) {
  std::smatch m;
  REQUIRE(s.wait_for(std::regex(R"(virgl_test_server pid (\d+) listening on (\S+))"), &m));
  return {static_cast<pid_t>(std::stol(m[1])), m[2]};
}

void check_nothing_left(const Started &st) {
  CHECK(kill(st.server, 0) == -1);
  CHECK(errno == ESRCH);
  CHECK(leftovers(st.server, st.socket).empty());
  CHECK_FALSE(fs::exists(st.socket));
  CHECK_FALSE(fs::exists(fs::path(st.socket).parent_path()));  // its private directory
}

#define REQUIRE_TREE()                \
  do {                                \
    std::string why;                  \
    if (!configured(&why)) FAIL(why); \
    REQUIRE(tree().error == "");      \
  } while (0)

}  // namespace

TEST_CASE("meson install puts the emulator beside the hooks, in a private directory",
          "[tools][serve][e2e]") {
  REQUIRE_TREE();
  const InstalledTree &t = tree();
  CHECK(fs::exists(t.lib + "/rocm-virgl/librvgl_emu.so"));
  CHECK_FALSE(fs::exists(t.lib + "/librvgl_emu.so"));  // not on the loader's path
  CHECK(fs::exists(t.lib + "/librocm_virgl.so"));
  for (const char *p : {"rvgl-serve", "rvgl-demo", "rvgl-info", "rvgl-spm", "rvgl-trace"})
    CHECK(fs::exists(t.bin + "/" + p));
}

TEST_CASE("installed rvgl-serve serves the installed demo and Ctrl-C leaves nothing behind",
          "[tools][serve][e2e]") {
  REQUIRE_TREE();
  Serve serve({});
  const Started st = started(serve);
  const auto demo = run_program({tree().bin + "/rvgl-demo", "--socket", st.socket});
  INFO(demo.out << demo.err << serve.output());
  CHECK(demo.exit_status == 0);
  CHECK(demo.out.find("result   : PASS") != std::string::npos);
  CHECK(demo.out.find("gfx 11.0.0") != std::string::npos);  // the default profile (gfx1100)

  // The issue's user path: record with rvgl-demo spm, then look at it with rvgl-spm.
  const std::string out = tree().root + "/spm-out";
  fs::create_directories(out);
  const auto rec = run_program({tree().bin + "/rvgl-demo", "--socket", st.socket, "spm",
                                "--buffers", "2", "--buffer-kib", "16", "--out-dir", out});
  INFO(rec.out << rec.err);
  CHECK(rec.exit_status == 0);
  CHECK(rec.out.find("counters : 124 per sample on AMD Radeon Graphics (gfx IP 11.0.0), "
                     "named GLOBAL_0 .. SE5_15") != std::string::npos);
  const auto spm = run_program({tree().bin + "/rvgl-spm", out + "/spm-recording.bin", "--png",
                                out + "/spm.png", "--summary", "--counters", "GLOBAL_0", "SE5_15"});
  INFO(spm.out << spm.err);
  CHECK(spm.exit_status == 0);
  CHECK(spm.err.empty());
  CHECK(spm.out.rfind("AMD Radeon Graphics (gfx IP 11.0.0): 2 buffers, 2 slices (0 with data "
                      "loss), ",
                      0) == 0);
  CHECK(std::regex_search(spm.out, std::regex("\n  GLOBAL_0 +events/sample ")));
  CHECK(std::regex_search(spm.out, std::regex("\n  SE5_15 +events/sample ")));
  CHECK(fs::file_size(out + "/spm.png") > 0);
  REQUIRE(kill(serve.pid(), SIGINT) == 0);  // what Ctrl-C sends
  CHECK(serve.wait_exit() == 0);
  CHECK(serve.output().find("rvgl-serve: stopped (Interrupt)") != std::string::npos);
  check_nothing_left(st);
}

TEST_CASE("SIGTERM stops the server and the process it forked for a connected client",
          "[tools][serve][e2e]") {
  REQUIRE_TREE();
  Serve serve({"--profile", "gfx942"});
  const Started st = started(serve);
  // A client that stays connected: the server forks a process for it.
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, st.socket.c_str(), sizeof(addr.sun_path) - 1);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) == 0);
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (leftovers(st.server, st.socket).size() < 2 && Clock::now() < give_up)
    usleep(10000);
  CHECK(leftovers(st.server, st.socket).size() == 2);  // the server and its child
  REQUIRE(kill(serve.pid(), SIGTERM) == 0);
  CHECK(serve.wait_exit() == 0);
  close(fd);
  check_nothing_left(st);
}

TEST_CASE("rvgl-serve --check runs rvgl-info against the server and stops it",
          "[tools][serve][e2e]") {
  REQUIRE_TREE();
  Serve serve({"--check", "--profile", "gfx942", "--knob", "SPM_RATE_HZ=500"});
  const Started st = started(serve);
  CHECK(serve.wait_exit() == 0);
  const std::string out = serve.output();
  INFO(out);
  CHECK(out.find("rocm-virgl capset 8 version 1") != std::string::npos);
  CHECK(out.find("9.4.3") != std::string::npos);  // the gfx942 profile's GC IP version
  CHECK(out.find("rvgl-serve: check passed; server stopped") != std::string::npos);
  check_nothing_left(st);
}

TEST_CASE("a server that dies ends rvgl-serve with status 1 and its socket removed",
          "[tools][serve][e2e]") {
  REQUIRE_TREE();
  Serve serve({});
  const Started st = started(serve);
  REQUIRE(kill(st.server, SIGKILL) == 0);
  CHECK(serve.wait_exit() == 1);
  check_nothing_left(st);
}

TEST_CASE("the server does not outlive an rvgl-serve killed outright", "[tools][serve][e2e]") {
  REQUIRE_TREE();
  Serve serve({});
  const Started st = started(serve);
  REQUIRE(kill(serve.pid(), SIGKILL) == 0);  // no cleanup runs: the kernel's parent-death signal
  CHECK(serve.wait_exit() == -1);            // killed, not exited
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (!leftovers(st.server, st.socket).empty() && Clock::now() < give_up)
    usleep(10000);
  CHECK(leftovers(st.server, st.socket).empty());
  std::error_code ec;
  fs::remove_all(fs::path(st.socket).parent_path(), ec);  // what rvgl-serve had no time to remove
}

TEST_CASE("rvgl-serve refuses options it cannot honour", "[tools][serve][e2e]") {
  REQUIRE_TREE();
  const std::string serve = tree().bin + "/rvgl-serve";
  const auto real = run_program({serve, "--real-gpu", "--profile", "gfx942"});
  CHECK(real.exit_status == 2);
  CHECK(real.err == "rvgl-serve: emulator options do not apply with --real-gpu\n");
  const auto knob = run_program({serve, "--knob", "lower=1"});
  CHECK(knob.exit_status == 2);
  const auto taken = run_program({serve, "--socket", tree().lib + "/librocm_virgl.so"});
  CHECK(taken.exit_status == 2);
  CHECK(taken.err.find("exists") != std::string::npos);
}
