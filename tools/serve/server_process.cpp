#include "server_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

namespace rvgl::serve {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> environment_with(const std::vector<std::string> &ours) {
  auto name = [](std::string_view v) { return v.substr(0, v.find('=') + 1); };
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) {
    bool replaced = false;
    for (const auto &mine : ours)
      replaced |= name(mine) == name(*e);
    if (!replaced) env.emplace_back(*e);
  }
  env.insert(env.end(), ours.begin(), ours.end());
  return env;
}

std::vector<char *> c_strings(std::vector<std::string> &v) {
  std::vector<char *> out;
  for (auto &s : v)
    out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

bool socket_listening(const std::string &path) {
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

std::vector<pid_t> live_group_members(pid_t pgid) {
  std::vector<pid_t> out;
  DIR *d = opendir("/proc");
  if (!d) return out;
  while (const dirent *e = readdir(d)) {
    char *end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end) continue;
    // /proc/PID/stat: "pid (comm) state ppid pgrp ..."; comm may hold spaces and parentheses.
    std::ifstream f(std::string("/proc/") + e->d_name + "/stat");
    std::string stat;
    std::getline(f, stat);
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (!(rest >> state >> ppid >> pgrp)) continue;
    if (pgrp == pgid && state != 'Z' && state != 'X') out.push_back(static_cast<pid_t>(pid));
  }
  closedir(d);
  return out;
}

bool ServerProcess::start(const ServerSpec &spec, std::string *error) {
  std::vector<std::string> args = {spec.program};
  args.insert(args.end(), spec.args.begin(), spec.args.end());
  std::vector<std::string> env = environment_with(spec.env_set);
  std::vector<char *> argv = c_strings(args), envp = c_strings(env);
  int log_fd = -1;
  if (!spec.log_path.empty()) {
    log_fd = open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (log_fd < 0) {
      *error = "cannot open " + spec.log_path + ": " + std::strerror(errno);
      return false;
    }
  }
  // The child reports a failed exec through this pipe (closed on a successful one).
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    if (log_fd >= 0) close(log_fd);
    *error = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  const pid_t parent = getpid();
  // fork + exec rather than posix_spawn for PR_SET_PDEATHSIG: if rvgl-serve itself is killed
  // (SIGKILL runs no cleanup), the server gets SIGTERM instead of serving on unowned. Only
  // async-signal-safe calls between fork and exec.
  const pid_t pid = fork();
  if (pid == 0) {
    // Its own group, so stop() reaches the per-client processes it forks; none of the signals
    // we block for sigtimedwait stay blocked in it.
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);  // we died before prctl took effect
    // Its output: the log, or our stderr (our stdout carries only rvgl-serve's own lines).
    dup2(log_fd >= 0 ? log_fd : STDERR_FILENO, STDOUT_FILENO);
    if (log_fd >= 0) dup2(log_fd, STDERR_FILENO);
    execvpe(argv[0], argv.data(), envp.data());
    const int e = errno;
    (void)!write(report[1], &e, sizeof(e));
    _exit(127);
  }
  close(report[1]);
  if (log_fd >= 0) close(log_fd);
  if (pid < 0) {
    close(report[0]);
    *error = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  int exec_errno = 0;
  ssize_t n;
  while ((n = read(report[0], &exec_errno, sizeof(exec_errno))) < 0 && errno == EINTR) {
  }
  close(report[0]);
  pid_ = pid;
  reaped_ = false;
  end_.clear();
  if (n > 0) {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    reaped_ = true;
    *error = "cannot start " + spec.program + ": " + std::strerror(exec_errno);
    return false;
  }
  return true;
}

void ServerProcess::record_end(int status) {
  reaped_ = true;
  end_ = WIFEXITED(status)     ? "exit status " + std::to_string(WEXITSTATUS(status))
         : WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                               : "stopped";
}

bool ServerProcess::running() {
  if (pid_ < 0 || reaped_) return false;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == 0) return true;
  if (r == pid_) record_end(status);
  if (r < 0) reaped_ = true;
  return false;
}

bool ServerProcess::wait_listening(const std::string &socket, int timeout_ms) {
  const auto give_up = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!socket_listening(socket)) {
    if (!running() || Clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void ServerProcess::stop(int grace_ms) {
  if (pid_ < 0) return;
  kill(-pid_, SIGTERM);
  const auto give_up = Clock::now() + std::chrono::milliseconds(grace_ms);
  while (running() || !live_group_members(pid_).empty()) {
    if (Clock::now() > give_up) {
      kill(-pid_, SIGKILL);
      if (!reaped_) {
        int status = 0;
        if (waitpid(pid_, &status, 0) == pid_) record_end(status);
        reaped_ = true;
      }
      // The group's orphans are reparented; wait (bounded) until the kernel has killed them.
      for (int i = 0; i < 200 && !live_group_members(pid_).empty(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pid_ = -1;
}

}  // namespace rvgl::serve
