// Counts calls per ioctl name and decides which one fails (RVGL_EMU_FAIL), so every error path
// of a caller can be driven from a test.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "config/config.h"

namespace rvgl::emu {

class FaultInjector {
 public:
  // Counts this call of `name`; returns the errno it must fail with, or 0.
  int on_call(std::string_view name);
  void set_rules(std::vector<FailRule> rules);
  void reset();  // drops the rules and the call counts

  std::mutex &fork_lock() { return mu_; }

 private:
  // Whether any rule is set: every ioctl of every thread asks, and without rules it takes no lock
  // (the kernel's ioctl path has no process-wide lock to stand for).
  std::atomic<bool> armed_{false};
  std::mutex mu_;
  std::vector<FailRule> rules_;
  std::unordered_map<std::string, uint64_t> calls_;
};

}  // namespace rvgl::emu
