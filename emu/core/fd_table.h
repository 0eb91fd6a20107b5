// fd number -> emulator object, for the fds the emulator handed out. A lock-free byte map
// (core/fast_state.h) answers "is this fd ours?" on every close/ioctl/mmap of the process without
// taking a lock. One table per process: the map is global.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/fast_state.h"
#include "core/open_file.h"

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
    std::lock_guard lk(mu_);
    if (fd < fast::kMarkedFds)
      __atomic_store_n(&fast::g_fd_marks[fd], 1, __ATOMIC_RELEASE);
    else if (!files_.count(fd))
      __atomic_add_fetch(&fast::g_big_fds, 1, __ATOMIC_ACQ_REL);
    files_[fd].swap(f);  // the replaced object, if any, goes when f does: after the unlock
  }
  std::shared_ptr<OpenFile> take(int fd) {
    std::lock_guard lk(mu_);
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
  mutable std::mutex mu_;
  std::unordered_map<int, std::shared_ptr<OpenFile>> files_;
};

}  // namespace rvgl::emu
