// The kernel's hold on a caller's eventfd for a SYNCOBJ_EVENTFD registration: eventfd_ctx_fdget()
// takes a reference on the file, not a descriptor, so registering spends none of the caller's
// RLIMIT_NOFILE. The emulator writes through the caller's own number while that number is the
// eventfd (the interposer sees every close, dup2/dup3 onto it and close_range, core/fd_table.h),
// and takes a descriptor of its own only when the number goes while a registration still needs
// the file: then the slot being closed makes room for it.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>

#include "interpose/real_libc.h"

namespace rvgl::emu {

class EventfdRef {
 public:
  explicit EventfdRef(int number) : number_(number) {}
  ~EventfdRef() {
    if (own_ >= 0) real::close(own_);
  }
  EventfdRef(const EventfdRef &) = delete;
  EventfdRef &operator=(const EventfdRef &) = delete;

  // eventfd_signal(): the counter goes up by one.
  void signal() {
    const uint64_t one = 1;
    std::lock_guard lk(mu_);
    const int fd = own_ >= 0 ? own_ : number_;
    if (fd >= 0) (void)!::write(fd, &one, sizeof(one));
  }
  // The caller's number is about to be closed or replaced; `needed`: a registration still holds
  // this reference, so the file is kept through a descriptor of our own. False when it is needed
  // and no descriptor could be had (the registration is then lost, -errno in errno).
  bool detach(bool needed) {
    std::lock_guard lk(mu_);
    if (number_ >= 0 && needed && own_ < 0) own_ = real::fcntl(number_, F_DUPFD_CLOEXEC, nullptr);
    number_ = -1;
    return own_ >= 0 || !needed;
  }

 private:
  std::mutex mu_;
  int number_;    // the caller's, while it is the eventfd; -1 once detached
  int own_ = -1;  // ours, once the caller's number went while still needed
};

}  // namespace rvgl::emu
