#include "util/self_pid.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace rvgl::emu {

namespace {

std::atomic<pid_t> g_pid{0};

void forget_pid() {
  g_pid.store(0, std::memory_order_relaxed);
}

}  // namespace

pid_t self_pid() {
  pid_t p = g_pid.load(std::memory_order_relaxed);
  if (p) return p;
  static std::once_flag atfork;
  std::call_once(atfork, [] { pthread_atfork(nullptr, nullptr, &forget_pid); });
  p = getpid();
  g_pid.store(p, std::memory_order_relaxed);
  return p;
}

}  // namespace rvgl::emu
