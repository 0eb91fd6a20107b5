#include "run_program.h"

#include "../support/spawn_args.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace rvgl::tools_test {

namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Removes the directory holding the child's output files whatever happens.
struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "rvgl-tools-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

std::string path_from_env(const char *name) {
  const char *v = std::getenv(name);
  return v ? v : "";
}

ProgramOutput run_program(const std::vector<std::string> &argv_in,
                          const std::vector<std::string> &env_in) {
  // Files rather than pipes: the child may print more than a pipe holds before we read.
  TempDir dir;
  const std::string out_path = dir.path + "/stdout", err_path = dir.path + "/stderr";

  std::vector<std::string> env = test::environment_with(env_in);
  std::vector<char *> envp = test::c_string_array(env);
  std::vector<std::string> args = argv_in;
  std::vector<char *> argv = test::c_string_array(args);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid;
  const int err = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ProgramOutput r;
  if (err) {
    r.err = "cannot start " + args[0] + ": " + std::strerror(err);
    return r;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  return r;
}

}  // namespace rvgl::tools_test
