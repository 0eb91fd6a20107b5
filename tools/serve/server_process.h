// The stock virgl_test_server as a child of rvgl-serve: started in a process group of its own
// (the server forks a process per client, and those must stop with it), watched until its socket
// listens, and stopped with everything it forked.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace rvgl::serve {

struct ServerSpec {
  std::string program;               // virgl_test_server, a path or a name looked up in PATH
  std::vector<std::string> args;     // after argv[0]
  std::vector<std::string> env_set;  // NAME=value, replacing inherited variables of that name
  std::string log_path;              // its stdout and stderr are appended here; "": our stderr
};

class ServerProcess {
 public:
  ServerProcess() = default;
  ~ServerProcess() { stop(); }
  ServerProcess(const ServerProcess &) = delete;
  ServerProcess &operator=(const ServerProcess &) = delete;

  // false with error when the program cannot be started.
  bool start(const ServerSpec &spec, std::string *error);
  // Waits until `socket` accepts connections (true), the server exits or `timeout_ms` passes.
  bool wait_listening(const std::string &socket, int timeout_ms);
  // Reaps the server if it has exited; true while it runs.
  bool running();
  // How it ended, for messages ("exit status 1", "signal 11"); "" while it runs.
  const std::string &end() const { return end_; }
  pid_t pid() const { return pid_; }
  // SIGTERM to the group, SIGKILL to what is left after `grace_ms`; returns once no process of
  // the group is left (zombies of exited children are not waited for: they are not ours).
  void stop(int grace_ms = 3000);

 private:
  void record_end(int status);
  pid_t pid_ = -1;
  bool reaped_ = true;
  std::string end_;
};

// A Unix socket at `path` that listens. The file appears at bind(), before listen(), so its
// existence is not enough: /proc/net/unix's Flags column has __SO_ACCEPTCON (0x10000) for a
// listening socket (Linux net/unix/af_unix.c, unix_seq_show).
bool socket_listening(const std::string &path);

// Processes of group `pgid` that are alive (not zombies), from /proc.
std::vector<pid_t> live_group_members(pid_t pgid);

}  // namespace rvgl::serve
