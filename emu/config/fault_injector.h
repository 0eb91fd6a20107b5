// Counts calls per ioctl name and decides which one fails (RVGL_EMU_FAIL), so every error path
// of a caller can be driven from a test.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "config/config.h"

namespace rvgl::emu {

class FaultInjector {
 public:
  // Counts this call of `name`; returns the errno it must fail with, or 0.
  int on_call(std::string_view name);
  void set_rules(std::vector<FailRule> rules);
  // Counts calls from zero, as rules do, with none failing (until reset() or new rules). The
  // calling thread's own calls are also counted apart (counting_thread_calls()), until reset().
  void count_calls();
  void reset();  // drops the rules and the call counts, and stops counting
  // The calls counted per name since the rules were set or count_calls(), by name.
  std::map<std::string, uint64_t> calls();
  // Of those, the calls the thread that called count_calls() made. A test's own thread makes its
  // calls in program order, so their number is the same in every run that takes the same path;
  // other threads' calls (a completion engine's) follow the host's timing.
  std::map<std::string, uint64_t> counting_thread_calls();

  std::mutex &fork_lock() { return mu_; }

 private:
  // Whether any rule is set or calls are counted: every ioctl of every thread asks, and otherwise
  // it takes no lock (the kernel's ioctl path has no process-wide lock to stand for).
  std::atomic<bool> armed_{false};
  std::mutex mu_;
  bool counting_ = false;
  std::vector<FailRule> rules_;
  std::unordered_map<std::string, uint64_t> calls_;
  std::thread::id counting_thread_;  // none unless count_calls() was called since reset()
  std::unordered_map<std::string, uint64_t> counting_thread_calls_;
};

}  // namespace rvgl::emu
