// The argument and environment arrays posix_spawn takes, for the tests and benchmarks that start
// programs (the stock vtest server, the tools).
#pragma once

#include <unistd.h>  // environ (_GNU_SOURCE)

#include <string>
#include <string_view>
#include <vector>

namespace rvgl::test {

// This process's environment with `ours` ("NAME=value") in place of any inherited variable of the
// same name: a duplicate would be shadowed by the inherited one, which getenv finds first.
inline std::vector<std::string> environment_with(const std::vector<std::string> &ours) {
  auto name = [](std::string_view v) {  // "NAME=" (the whole entry if it has no '=')
    const size_t eq = v.find('=');
    return eq == std::string_view::npos ? v : v.substr(0, eq + 1);
  };
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

// Null-terminated pointers into `strings`, which must outlive the result.
inline std::vector<char *> c_string_array(std::vector<std::string> &strings) {
  std::vector<char *> out;
  for (auto &s : strings)
    out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace rvgl::test
