// rvgl-serve: a rocm-virgl host in one command, for guest-driver developers. Starts the stock
// virgl_test_server on a socket it prints, with our hooks (librocm_virgl.so) and, unless
// --real-gpu, the emulated amdgpu (librvgl_emu.so) preloaded; stops it, with every process it
// forked and its socket, on Ctrl-C or SIGTERM. --check runs `rvgl-info --vtest` against it and
// stops. Exit status: 0 after a requested stop or a passing check, 1 when the server died or the
// check failed, 2 when it could not start.
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <system_error>

#include "install_layout.h"
#include "server_process.h"

namespace fs = std::filesystem;
using rvgl::serve::ServerProcess;

namespace {

struct Options {
  std::string socket, server = "virgl_test_server", hooks, emulator, render_node, log;
  bool real_gpu = false, display = false, one_process = false, check = false;
  std::string profile, state_dir;
  std::optional<uint32_t> devices, xccs;
  std::vector<std::string> knobs;  // NAME=VALUE, NAME with or without RVGL_EMU_
};

void say(const std::string &line) {
  fmt::print("rvgl-serve: {}\n", line);
  std::fflush(stdout);
}

// A private directory for the socket, removed with it however rvgl-serve ends (but SIGKILL).
class SocketDir {
 public:
  bool create() {
    const char *base = std::getenv("XDG_RUNTIME_DIR");
    if (!base || !*base) base = std::getenv("TMPDIR");
    std::string templ = std::string(base && *base ? base : "/tmp") + "/rvgl-serve-XXXXXX";
    if (!mkdtemp(templ.data())) return false;
    dir_ = templ;
    return true;
  }
  void own_file(const std::string &path) { file_ = path; }
  ~SocketDir() {
    std::error_code ec;
    if (!file_.empty()) fs::remove(file_, ec);
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  const std::string &dir() const { return dir_; }

 private:
  std::string dir_, file_;
};

// "PROFILE=x" or "RVGL_EMU_PROFILE=x" -> "RVGL_EMU_PROFILE=x"; "" when malformed.
std::string knob_variable(const std::string &knob) {
  const size_t eq = knob.find('=');
  if (eq == 0 || eq == std::string::npos) return "";
  std::string name = knob.substr(0, eq);
  for (char c : name)
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return "";
  if (name.rfind("RVGL_EMU_", 0) != 0) name = "RVGL_EMU_" + name;
  return name + knob.substr(eq);
}

// What the server will see for a setting: ours, else the inherited variable, else the default.
std::string setting(const std::string &ours, const char *variable, const char *fallback) {
  if (!ours.empty()) return ours;
  const char *v = std::getenv(variable);
  return v && *v ? v : fallback;
}

int run_and_wait(const std::vector<std::string> &args) {
  std::vector<std::string> a = args;
  std::vector<char *> argv;
  for (auto &s : a)
    argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  const int err = posix_spawn(&pid, argv[0], nullptr, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  if (err) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int serve(const Options &o) {
  const rvgl::serve::InstallLayout found = rvgl::serve::find_install_layout();
  const std::string hooks = o.hooks.empty() ? found.hooks : o.hooks;
  const std::string emulator = o.emulator.empty() ? found.emulator : o.emulator;
  if (hooks.empty() || !fs::exists(hooks)) {
    fmt::print(stderr, "rvgl-serve: librocm_virgl.so not found beside {} (give --hooks)\n",
               rvgl::serve::program_dir());
    return 2;
  }
  if (!o.real_gpu && (emulator.empty() || !fs::exists(emulator))) {
    fmt::print(stderr, "rvgl-serve: librvgl_emu.so not found beside {} (give --emu)\n",
               rvgl::serve::program_dir());
    return 2;
  }

  rvgl::serve::ServerSpec spec;
  spec.program = o.server;
  SocketDir dir;
  std::string socket = o.socket;
  if (socket.empty()) {
    if (!dir.create()) {
      fmt::print(stderr, "rvgl-serve: cannot create a directory for the socket\n");
      return 2;
    }
    socket = dir.dir() + "/vtest.sock";
  } else {
    std::error_code ec;
    if (fs::exists(fs::symlink_status(socket, ec))) {
      fmt::print(stderr, "rvgl-serve: {} exists; remove it or give another --socket\n", socket);
      return 2;
    }
    socket = fs::absolute(socket).string();
  }
  dir.own_file(socket);
  // Note the '=': with a space, 0.10.4 takes the path as its replay [file] argument.
  spec.args = {"--socket-path=" + socket};
  if (o.one_process) spec.args.insert(spec.args.end(), {"--no-fork", "--multi-clients"});

  const char *inherited = std::getenv("LD_PRELOAD");
  std::string preload = inherited && *inherited ? std::string(inherited) + ":" : "";
  preload += o.real_gpu ? hooks : emulator + ":" + hooks;
  spec.env_set.push_back("LD_PRELOAD=" + preload);
  // The stock server always asks virglrenderer for EGL; compute-only turns that into NO_VIRGL so
  // no display-capable render node is needed (docs/vmm-integration.md, section 6).
  if (!o.display) spec.env_set.push_back("RVGL_COMPUTE_ONLY=1");
  if (!o.render_node.empty()) spec.env_set.push_back("RVGL_RENDER_NODE=" + o.render_node);
  if (!o.real_gpu) {
    if (!o.profile.empty()) spec.env_set.push_back("RVGL_EMU_PROFILE=" + o.profile);
    if (o.devices) spec.env_set.push_back(fmt::format("RVGL_EMU_DEVICES={}", *o.devices));
    if (o.xccs) spec.env_set.push_back(fmt::format("RVGL_EMU_XCCS={}", *o.xccs));
    if (!o.state_dir.empty())
      spec.env_set.push_back("RVGL_EMU_STATE_DIR=" + fs::absolute(o.state_dir).string());
    for (const auto &k : o.knobs)
      spec.env_set.push_back(knob_variable(k));
  }
  if (!o.log.empty()) spec.log_path = fs::absolute(o.log).string();

  // Signals are taken synchronously (sigtimedwait); the server starts with none blocked.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD})
    sigaddset(&stop_signals, s);
  sigprocmask(SIG_BLOCK, &stop_signals, nullptr);

  ServerProcess server;
  std::string err;
  if (!server.start(spec, &err)) {
    fmt::print(stderr, "rvgl-serve: {}\n", err);
    return 2;
  }
  if (!server.wait_listening(socket, 10000)) {
    const bool died = !server.running();
    fmt::print(stderr, "rvgl-serve: {} did not open {} ({})\n", o.server, socket,
               died ? server.end() : "timed out after 10 s");
    return 2;
  }
  if (o.real_gpu)
    say(fmt::format("real GPU{}, hooks {}",
                    o.render_node.empty() ? " (first amdgpu render node)" : " " + o.render_node,
                    hooks));
  else
    say(fmt::format("emulated GPU (profile {}, {} device(s)), {} and {}",
                    setting(o.profile, "RVGL_EMU_PROFILE", "gfx1100"),
                    setting(o.devices ? std::to_string(*o.devices) : "", "RVGL_EMU_DEVICES", "1"),
                    emulator, hooks));
  say(fmt::format("{} pid {} listening on {}", o.server, server.pid(), socket));

  if (o.check) {
    if (found.rvgl_info.empty()) {
      fmt::print(stderr, "rvgl-serve: rvgl-info not found beside {}\n", rvgl::serve::program_dir());
      return 2;
    }
    const int status = run_and_wait({found.rvgl_info, "--vtest", socket});
    server.stop();
    say(status == 0 ? "check passed; server stopped" : "check FAILED; server stopped");
    return status == 0 ? 0 : 1;
  }
  say(fmt::format("connect with: rvgl-demo --socket {}", socket));
  say("Ctrl-C (or SIGTERM) stops it");

  for (;;) {
    const timespec tick{0, 200 * 1000 * 1000};
    const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      server.stop();
      say(fmt::format("stopped ({})", strsignal(sig)));
      return 0;
    }
    if (!server.running()) {
      fmt::print(stderr, "rvgl-serve: the server ended by itself ({})\n", server.end());
      server.stop();  // its forked children, if any
      return 1;
    }
  }
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{
      "rvgl-serve: the stock virgl_test_server with rocm-virgl's hooks and, unless --real-gpu, "
      "the emulated amdgpu"};
  Options o;
  app.add_option("-s,--socket", o.socket, "socket path (default: in a new private directory)");
  app.add_flag("--real-gpu", o.real_gpu, "use the host's AMD GPU instead of the emulator");
  app.add_option("--render-node", o.render_node, "render node for the hooks (RVGL_RENDER_NODE)");
  app.add_option("--profile", o.profile, "emulated device profile: gfx1100 or gfx942");
  app.add_option("--devices", o.devices, "emulated render nodes (1-16)")->check(CLI::Range(1, 16));
  app.add_option("--xccs", o.xccs, "XCCs per emulated node (0: the profile's)");
  app.add_option("--state-dir", o.state_dir,
                 "emulator state directory (SPM locks: servers sharing one contend)");
  app.add_option("--knob", o.knobs, "an emulator knob NAME=VALUE (emu/README.md), repeatable");
  app.add_flag("--display", o.display,
               "keep virglrenderer's display path (no RVGL_COMPUTE_ONLY; needs working EGL)");
  app.add_flag("--one-process", o.one_process, "serve every client in one process");
  app.add_flag("--check", o.check, "run rvgl-info --vtest against the server, then stop it");
  app.add_option("--server", o.server, "the vtest server program");
  app.add_option("--hooks", o.hooks, "librocm_virgl.so to preload (default: the installed one)");
  app.add_option("--emu", o.emulator, "librvgl_emu.so to preload (default: the installed one)");
  app.add_option("--log", o.log, "append the server's output to this file");
  CLI11_PARSE(app, argc, argv);
  if (o.real_gpu &&
      (!o.profile.empty() || o.devices || o.xccs || !o.state_dir.empty() || !o.knobs.empty())) {
    fmt::print(stderr, "rvgl-serve: emulator options do not apply with --real-gpu\n");
    return 2;
  }
  for (const auto &k : o.knobs)
    if (knob_variable(k).empty()) {
      fmt::print(stderr, "rvgl-serve: --knob takes NAME=VALUE, NAME in [A-Z0-9_]: {}\n", k);
      return 2;
    }
  return serve(o);
}
