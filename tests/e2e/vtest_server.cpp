#include "vtest_server.h"

#include "../support/spawn_args.h"

#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>

namespace rvgl::e2e {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const char *env_or_null(const char *name) {
  const char *v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// Shared sanitizer runtimes loaded into this process, in load order.
std::vector<std::string> sanitizer_runtimes() {
  std::vector<std::string> found;
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) {
        const std::string name = info->dlpi_name ? info->dlpi_name : "";
        for (const char *rt : {"libasan.so", "libtsan.so", "libubsan.so"})
          if (name.find(rt) != std::string::npos)
            static_cast<std::vector<std::string> *>(data)->push_back(name);
        return 0;
      },
      &found);
  return found;
}

// The socket file appears at bind(), before listen(): a client connecting in between is refused.
// /proc/net/unix marks listening sockets with __SO_ACCEPTCON (0x10000) in its Flags column.
bool is_listening(const std::string &path) {
  std::ifstream f("/proc/net/unix");
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string num, refs, proto, flags, type, st, inode, name;
    if (!(in >> num >> refs >> proto >> flags >> type >> st >> inode >> name) || name != path)
      continue;
    if (std::stoul(flags, nullptr, 16) & 0x10000) return true;
  }
  return false;
}

}  // namespace

bool e2e_configured(std::string *why) {
  if (!env_or_null("RVGL_E2E_SERVER")) {
    *why = "RVGL_E2E_SERVER is not set (run through meson test)";
    return false;
  }
  if (!env_or_null("RVGL_E2E_PRELOAD")) {
    *why = "RVGL_E2E_PRELOAD is not set (run through meson test)";
    return false;
  }
  return true;
}

VtestServer::VtestServer(const ServerOptions &options) {
  std::string why;
  if (!e2e_configured(&why)) throw std::runtime_error(why);
  const std::string server = env_or_null("RVGL_E2E_SERVER");

  std::string tmpl = (fs::temp_directory_path() / "rvgl-e2e-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  socket_ = dir_ + "/vtest.sock";
  log_path_ = dir_ + "/server.log";
  state_dir_ = dir_ + "/emu";
  for (const auto &e : options.extra_env)
    if (e.rfind("RVGL_EMU_STATE_DIR=", 0) == 0) state_dir_ = e.substr(19);

  // The environment: ours, minus any preload, plus the server's.
  std::string preload;
  for (const auto &rt : sanitizer_runtimes())
    preload += rt + ":";
  preload += env_or_null("RVGL_E2E_PRELOAD");
  // What we set replaces what we inherited (getenv would find the inherited one first).
  std::vector<std::string> ours = {
      "LD_PRELOAD=" + preload,
      std::string("RVGL_COMPUTE_ONLY=") + (options.compute_only ? "1" : "0"),
      "RVGL_EMU_STATE_DIR=" + state_dir_,
      // The server is not instrumented and leaks at exit by design; only our libraries are checked.
      "ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0",
  };
  ours.insert(ours.end(), options.extra_env.begin(), options.extra_env.end());
  std::vector<std::string> env = test::environment_with(ours);
  std::vector<char *> envp = test::c_string_array(env);

  // Note the '=': Debian's server takes a path after a space as its replay [file] argument.
  std::vector<std::string> args = {server, "--socket-path=" + socket_};
  if (options.one_process) {
    args.push_back("--no-fork");
    args.push_back("--multi-clients");
  }
  std::vector<char *> argv = test::c_string_array(args);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group: stop() reaches the forked children
  const int err = posix_spawn(&pid_, server.c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (err) {
    pid_ = -1;
    fs::remove_all(dir_);
    throw std::runtime_error("cannot start " + server + ": " + std::strerror(err));
  }

  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (!is_listening(socket_)) {
    if (!running() || Clock::now() > give_up) {
      const std::string l = log();
      stop();
      throw std::runtime_error("the server did not open its socket; its output:\n" + l);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

VtestServer::~VtestServer() {
  stop();
}

bool VtestServer::running() {
  if (pid_ < 0) return false;
  int status;
  return waitpid(pid_, &status, WNOHANG) == 0;
}

std::string VtestServer::log() const {
  std::ifstream f(log_path_);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void VtestServer::stop() {
  if (pid_ > 0) {
    kill(-pid_, SIGTERM);
    const auto give_up = Clock::now() + std::chrono::seconds(3);
    int status;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > give_up) {
        kill(-pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    kill(-pid_, SIGKILL);  // forked children still serving a client, if any
    pid_ = -1;
  }
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    dir_.clear();
  }
}

}  // namespace rvgl::e2e
