#include "emu_counters_file.h"

#include <filesystem>
#include <fstream>

namespace rvgl::e2e {

std::optional<EmuCounters> read_emu_counters(const std::string &state_dir, pid_t pid) {
  std::ifstream f(state_dir + "/counters-" + std::to_string(pid) + ".txt");
  if (!f) return std::nullopt;
  EmuCounters c;
  std::string name;
  uint64_t value;
  while (f >> name >> value)
    c[name] = value;
  return c;
}

std::vector<pid_t> emu_counter_pids(const std::string &state_dir) {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto &e : std::filesystem::directory_iterator(state_dir, ec)) {
    const std::string n = e.path().filename().string();
    const std::string prefix = "counters-", suffix = ".txt";
    if (n.size() <= prefix.size() + suffix.size() || n.rfind(prefix, 0) != 0 ||
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    try {
      pids.push_back(static_cast<pid_t>(
          std::stol(n.substr(prefix.size(), n.size() - prefix.size() - suffix.size()))));
    } catch (const std::exception &) {
    }
  }
  return pids;
}

uint64_t counter(const EmuCounters &c, const std::string &name) {
  auto it = c.find(name);
  return it == c.end() ? 0 : it->second;
}

}  // namespace rvgl::e2e
