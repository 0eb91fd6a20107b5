// fd number -> emulator object, for the fds the emulator handed out. A lock-free byte map
// (core/fast_state.h) answers "is this fd ours?" on every close/ioctl/mmap of the process without
// taking a lock. One table per process: the map is global.
#pragma once

#include <memory>
#include <unordered_map>

#include "core/fast_state.h"
#include "core/open_file.h"

namespace rvgl::emu {

class FdTable {
 public:
  bool maybe_tracked(int fd) const noexcept { return fast::fd_maybe_ours(fd); }
  // The rest: emulator state lock held.
  std::shared_ptr<OpenFile> get(int fd) const {
    auto it = files_.find(fd);
    return it == files_.end() ? nullptr : it->second;
  }
  void set(int fd, std::shared_ptr<OpenFile> f) {
    if (fd < 0) return;
    if (fd < fast::kMarkedFds)
      __atomic_store_n(&fast::g_fd_marks[fd], 1, __ATOMIC_RELEASE);
    else if (!files_.count(fd))
      __atomic_add_fetch(&fast::g_big_fds, 1, __ATOMIC_ACQ_REL);
    files_[fd] = std::move(f);
  }
  std::shared_ptr<OpenFile> take(int fd) {
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
  size_t size() const { return files_.size(); }
  template <typename Fn>
  void for_each(Fn &&fn) const {
    for (const auto &[fd, f] : files_)
      fn(fd, f);
  }

 private:
  std::unordered_map<int, std::shared_ptr<OpenFile>> files_;
};

}  // namespace rvgl::emu
