// fd number -> emulator object, for the fds the emulator handed out. A lock-free byte map answers
// "is this fd ours?" on every close/ioctl/mmap of the process without taking a lock.
#pragma once

#include <atomic>
#include <memory>
#include <unordered_map>

#include "core/open_file.h"

namespace rvgl::emu {

class FdTable {
 public:
  FdTable() : fast_(new std::atomic<uint8_t>[kFast]()) {}
  bool maybe_tracked(int fd) const noexcept {
    if (fd < 0) return false;
    if (fd < kFast) return fast_[fd].load(std::memory_order_acquire) != 0;
    return big_.load(std::memory_order_acquire) != 0;
  }
  // The rest: emulator state lock held.
  std::shared_ptr<OpenFile> get(int fd) const {
    auto it = files_.find(fd);
    return it == files_.end() ? nullptr : it->second;
  }
  void set(int fd, std::shared_ptr<OpenFile> f) {
    if (fd < 0) return;
    if (fd < kFast)
      fast_[fd].store(1, std::memory_order_release);
    else if (!files_.count(fd))
      big_.fetch_add(1, std::memory_order_acq_rel);
    files_[fd] = std::move(f);
  }
  std::shared_ptr<OpenFile> take(int fd) {
    auto it = files_.find(fd);
    if (it == files_.end()) return nullptr;
    auto f = std::move(it->second);
    files_.erase(it);
    if (fd < kFast)
      fast_[fd].store(0, std::memory_order_release);
    else
      big_.fetch_sub(1, std::memory_order_acq_rel);
    return f;
  }
  size_t size() const { return files_.size(); }
  template <typename Fn>
  void for_each(Fn &&fn) const {
    for (const auto &[fd, f] : files_)
      fn(fd, f);
  }

 private:
  static constexpr int kFast = 1 << 16;
  std::unique_ptr<std::atomic<uint8_t>[]> fast_;
  std::atomic<uint32_t> big_{0};
  std::unordered_map<int, std::shared_ptr<OpenFile>> files_;
};

}  // namespace rvgl::emu
