#include "stock_vtest_server.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

extern char **environ;

namespace rvgl::guest::test {

StockVtestServer::StockVtestServer(const std::string &binary, const std::string &preload) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "rvgl-vtest-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) return;
  dir_ = tmpl;
  socket_ = (dir_ / "vtest.sock").string();
  const std::string log = (dir_ / "server.log").string();

  // --socket-path=PATH with '=': after a space the path would be taken as the replay file.
  std::vector<std::string> args = {binary, "--socket-path=" + socket_};
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e)
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0) env.emplace_back(*e);
  if (!preload.empty()) env.push_back("LD_PRELOAD=" + preload);
  std::vector<char *> argv, envp;
  for (auto &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto &e : env)
    envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  if (posix_spawn(&pid, binary.c_str(), &fa, nullptr, argv.data(), envp.data()) == 0) pid_ = pid;
  posix_spawn_file_actions_destroy(&fa);
}

StockVtestServer::~StockVtestServer() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    int status;
    waitpid(pid_, &status, 0);
  }
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

bool StockVtestServer::wait_listening(int timeout_ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < until) {
    int status;
    if (pid_ <= 0 || waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    // Probe with a plain connect; the server forks a child for it that exits when we close.
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_.c_str(), sizeof(addr.sun_path) - 1);
    const bool ok = connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::string StockVtestServer::log() const {
  std::ifstream in(dir_ / "server.log");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace rvgl::guest::test
