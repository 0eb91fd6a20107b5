#include "exec/worker_thread.h"

#include <signal.h>

namespace rvgl::emu {

void *WorkerThread::trampoline(void *arg) {
  static_cast<WorkerThread *>(arg)->body_();
  return nullptr;
}

bool WorkerThread::start(std::function<void()> body) {
  if (started_) return true;
  body_ = std::move(body);
  // Emulator threads take no signals: the caller's handlers must keep running on its own threads.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  started_ = pthread_create(&tid_, nullptr, &WorkerThread::trampoline, this) == 0;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return started_;
}

void WorkerThread::join() {
  if (!started_) return;
  pthread_join(tid_, nullptr);
  started_ = false;
}

}  // namespace rvgl::emu
