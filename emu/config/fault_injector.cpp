#include "config/fault_injector.h"

namespace rvgl::emu {

int FaultInjector::on_call(std::string_view name) {
  if (!armed_.load(std::memory_order_acquire)) return 0;
  std::lock_guard lk(mu_);
  if (rules_.empty() && !counting_) return 0;
  std::string key(name);
  if (counting_thread_ == std::this_thread::get_id()) ++counting_thread_calls_[key];
  const uint64_t n = ++calls_[std::move(key)];
  for (const auto &r : rules_) {
    if (r.name != name) continue;
    if (n == r.nth || (r.and_after && n > r.nth)) return r.err;
  }
  return 0;
}

void FaultInjector::set_rules(std::vector<FailRule> rules) {
  std::lock_guard lk(mu_);
  rules_ = std::move(rules);
  calls_.clear();
  counting_thread_calls_.clear();
  armed_.store(counting_ || !rules_.empty(), std::memory_order_release);
}

void FaultInjector::count_calls() {
  std::lock_guard lk(mu_);
  counting_ = true;
  calls_.clear();
  counting_thread_ = std::this_thread::get_id();
  counting_thread_calls_.clear();
  armed_.store(true, std::memory_order_release);
}

void FaultInjector::reset() {
  std::lock_guard lk(mu_);
  rules_.clear();
  calls_.clear();
  counting_ = false;
  counting_thread_ = {};
  counting_thread_calls_.clear();
  armed_.store(false, std::memory_order_release);
}

std::map<std::string, uint64_t> FaultInjector::calls() {
  std::lock_guard lk(mu_);
  return {calls_.begin(), calls_.end()};
}

std::map<std::string, uint64_t> FaultInjector::counting_thread_calls() {
  std::lock_guard lk(mu_);
  return {counting_thread_calls_.begin(), counting_thread_calls_.end()};
}

}  // namespace rvgl::emu
