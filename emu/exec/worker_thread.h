// A raw pthread the emulator owns. After fork() the child has no such thread, so the handle must be
// forgettable without a join (std::thread would terminate the child on destruction).
#pragma once

#include <pthread.h>

#include <functional>

namespace rvgl::emu {

class WorkerThread {
 public:
  WorkerThread() = default;
  ~WorkerThread() { join(); }
  WorkerThread(const WorkerThread &) = delete;
  WorkerThread &operator=(const WorkerThread &) = delete;

  bool start(std::function<void()> body);
  void join();
  bool running() const { return started_; }
  // In a forked child: the thread does not exist here.
  void forget() { started_ = false; }

 private:
  static void *trampoline(void *arg);
  pthread_t tid_{};
  bool started_ = false;
  std::function<void()> body_;
};

}  // namespace rvgl::emu
