// fd number -> emulator object, for the fds the emulator handed out. A lock-free byte map
// (core/fast_state.h) answers "is this fd ours?" on every close/ioctl/mmap of the process without
// taking a lock. One table per process: the map is global.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/fast_state.h"
#include "core/open_file.h"
#include "sync/eventfd_ref.h"

namespace rvgl::emu {

class FdTable {
 public:
  bool maybe_tracked(int fd) const noexcept { return fast::fd_maybe_ours(fd); }
  // Its own lock, so an ioctl finds its file without the emulator state lock, as the kernel's
  // fdget() takes no lock another ioctl holds (callers that change the table also hold the
  // state lock, which comes first). Objects are never destroyed under it.
  std::shared_ptr<OpenFile> get(int fd) const {
    std::lock_guard lk(mu_);
    auto it = files_.find(fd);
    return it == files_.end() ? nullptr : it->second;
  }
  void set(int fd, std::shared_ptr<OpenFile> f) {
    if (fd < 0) return;
    // An eventfd still known at a number that is now ours (closed around libc): forgotten, and
    // our reference goes after the unlock. The number is another file now: nothing is kept
    // through it.
    std::shared_ptr<EventfdRef> stale;
    std::lock_guard lk(mu_);
    stale = drop_eventfd_locked(fd, /*still_the_eventfd=*/false);
    if (fd < fast::kMarkedFds)
      __atomic_store_n(&fast::g_fd_marks[fd], 1, __ATOMIC_RELEASE);
    else if (!files_.count(fd))
      __atomic_add_fetch(&fast::g_big_fds, 1, __ATOMIC_ACQ_REL);
    files_[fd].swap(f);  // the replaced object, if any, goes when f does: after the unlock
  }
  // Also forgets a known eventfd at that number (the number was closed or is being replaced).
  std::shared_ptr<OpenFile> take(int fd) {
    std::shared_ptr<EventfdRef> eventfd;  // our reference goes after the unlock
    std::lock_guard lk(mu_);
    eventfd = drop_eventfd_locked(fd, true);
    if (eventfd) __atomic_store_n(&fast::g_fd_marks[fd], 0, __ATOMIC_RELEASE);
    auto it = files_.find(fd);
    if (it == files_.end()) return nullptr;
    auto f = std::move(it->second);
    files_.erase(it);
    if (fd < fast::kMarkedFds)
      __atomic_store_n(&fast::g_fd_marks[fd], 0, __ATOMIC_RELEASE);
    else
      __atomic_sub_fetch(&fast::g_big_fds, 1, __ATOMIC_ACQ_REL);
    return f;
  }

  // Eventfds of the caller that SYNCOBJ_EVENTFD verified, by fd number, each with our hold on it
  // (sync/eventfd_ref.h: no descriptor of ours while the number is the eventfd; the kernel's
  // registration holds the eventfd context, not a number). The number
  // is marked as the emulator's own fds are, so a close, dup2/dup3 onto it or close_range comes
  // through the interposer and forgets it (take(), forget_eventfds()); a re-arm then trusts the
  // number without a system call, as eventfd_ctx_fdget() makes none. A number closed behind
  // libc's back (a raw syscall) goes unseen: the same limit as for the emulator's own fds. Only
  // numbers below the byte map's size are kept.
  std::shared_ptr<EventfdRef> known_eventfd(int fd) const {
    std::lock_guard lk(mu_);
    auto it = eventfds_.find(fd);
    return it == eventfds_.end() ? nullptr : it->second;
  }
  // False when the number cannot be watched (the caller then needs a descriptor of its own).
  bool remember_eventfd(int fd, std::shared_ptr<EventfdRef> ref) {
    if (fd < 0 || fd >= fast::kMarkedFds) return false;
    std::lock_guard lk(mu_);
    if (files_.count(fd)) return false;  // an emulator fd is never an eventfd of the caller
    eventfds_[fd].swap(ref);             // a replaced reference goes after the unlock
    __atomic_store_n(&fast::g_fd_marks[fd], 1, __ATOMIC_RELEASE);
    return true;
  }
  // The number is about to be replaced (dup2/dup3 onto it): forgotten while it is still the
  // eventfd, so a registration that needs the file keeps it.
  void forget_eventfd(int fd) {
    std::shared_ptr<EventfdRef> gone;  // after the unlock
    std::lock_guard lk(mu_);
    gone = drop_eventfd_locked(fd, true);
  }
  void forget_eventfds(unsigned first, unsigned last) {
    std::vector<std::shared_ptr<EventfdRef>> gone;  // after the unlock
    std::lock_guard lk(mu_);
    std::vector<int> numbers;
    for (const auto &[fd, ref] : eventfds_)
      if (static_cast<unsigned>(fd) >= first && static_cast<unsigned>(fd) <= last)
        numbers.push_back(fd);
    for (int fd : numbers) {
      gone.push_back(drop_eventfd_locked(fd, true));
      __atomic_store_n(&fast::g_fd_marks[fd], 0, __ATOMIC_RELEASE);
    }
  }
  size_t size() const {
    std::lock_guard lk(mu_);
    return files_.size();
  }
  std::mutex &fork_lock() { return mu_; }
  // fn runs under the table's lock: it must not call back into the table.
  template <typename Fn>
  void for_each(Fn &&fn) const {
    std::lock_guard lk(mu_);
    for (const auto &[fd, f] : files_)
      fn(fd, f);
  }

 private:
  // Takes a known eventfd at `fd` out of the table (null if none); the caller keeps the
  // reference until after the unlock and decides the number's mark. still_the_eventfd: the number
  // is not closed yet, so a registration holding the reference keeps the file (EventfdRef).
  std::shared_ptr<EventfdRef> drop_eventfd_locked(int fd, bool still_the_eventfd) {
    auto e = eventfds_.find(fd);
    if (e == eventfds_.end()) return nullptr;
    auto ref = std::move(e->second);
    eventfds_.erase(e);
    ref->detach(still_the_eventfd && ref.use_count() > 1);
    return ref;
  }

  mutable std::mutex mu_;
  std::unordered_map<int, std::shared_ptr<OpenFile>> files_;
  std::unordered_map<int, std::shared_ptr<EventfdRef>> eventfds_;
};

}  // namespace rvgl::emu
