// The stock virgl_test_server for a test: started on a private socket in a temporary directory,
// with the emulated GPU and our hooks preloaded and RVGL_COMPUTE_ONLY=1, stopped (with every
// per-client child it forked) when the object goes.
//
// Paths come from the environment meson test sets: RVGL_E2E_SERVER (the server program) and
// RVGL_E2E_PRELOAD (the libraries to preload, ':'-separated). When this test process runs under a
// sanitizer whose runtime is a shared library, that runtime is preloaded first: the preloaded
// libraries are instrumented too, and the uninstrumented server must load the runtime before them.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace rvgl::e2e {

struct ServerOptions {
  // --no-fork --multi-clients: every client in one server process. (--multi-clients alone still
  // forks a process per client: 0.10.4 only stops forking with --no-fork.)
  bool one_process = false;
  bool compute_only = true;  // RVGL_COMPUTE_ONLY
  // NAME=value. RVGL_EMU_STATE_DIR defaults to a directory of this server's own: the emulated
  // SPM is exclusive across every process sharing a state directory, and other test programs
  // may be running at the same time.
  std::vector<std::string> extra_env;
};

class VtestServer {
 public:
  // Throws std::runtime_error when the server cannot be started.
  explicit VtestServer(const ServerOptions &options = {});
  ~VtestServer();
  VtestServer(const VtestServer &) = delete;
  VtestServer &operator=(const VtestServer &) = delete;

  const std::string &socket_path() const { return socket_; }
  const std::string &emu_state_dir() const { return state_dir_; }
  pid_t pid() const { return pid_; }
  bool running();           // the server process (the parent) is still alive
  std::string log() const;  // what the server printed so far

 private:
  void stop();

  std::string dir_;
  std::string socket_;
  std::string state_dir_;
  std::string log_path_;
  pid_t pid_ = -1;
};

// True when the environment names a server and preload libraries (the e2e tests' prerequisites).
bool e2e_configured(std::string *why);

}  // namespace rvgl::e2e
