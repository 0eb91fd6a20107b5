// Runs one of the built tools as a child process and collects what it printed, for the tests
// that check the programs as a user runs them (not only their libraries).
#pragma once

#include <string>
#include <vector>

namespace rvgl::tools_test {

struct ProgramOutput {
  int exit_status = -1;  // the exit code, or -1 when the child did not exit normally
  std::string out;       // stdout
  std::string err;       // stderr
};

// `argv[0]` is the program's path. `env` entries (NAME=value) replace the same names of this
// process's environment; the rest is inherited.
ProgramOutput run_program(const std::vector<std::string> &argv,
                          const std::vector<std::string> &env = {});

// The path in environment variable `name` (set by meson test), or "" when unset.
std::string path_from_env(const char *name);

}  // namespace rvgl::tools_test
