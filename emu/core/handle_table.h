// A per-file handle namespace that hands out the lowest free id from 1, as the kernel's idr does,
// so handle numbers look like a real driver's (and get reused the same way).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>

namespace rvgl::emu {

template <typename T>
class HandleTable {
 public:
  uint32_t insert(T value) {
    uint32_t id;
    if (!free_.empty()) {
      id = *free_.begin();
      free_.erase(free_.begin());
    } else {
      id = next_++;
    }
    items_.emplace(id, std::move(value));
    return id;
  }

  T *find(uint32_t id) {
    auto it = items_.find(id);
    return it == items_.end() ? nullptr : &it->second;
  }
  const T *find(uint32_t id) const {
    auto it = items_.find(id);
    return it == items_.end() ? nullptr : &it->second;
  }

  bool erase(uint32_t id, T *out = nullptr) {
    auto it = items_.find(id);
    if (it == items_.end()) return false;
    if (out) *out = std::move(it->second);
    items_.erase(it);
    if (id + 1 == next_) {
      --next_;
      while (next_ > 1 && free_.erase(next_ - 1))
        --next_;
    } else {
      free_.insert(id);
    }
    return true;
  }

  size_t size() const { return items_.size(); }
  auto begin() { return items_.begin(); }
  auto end() { return items_.end(); }
  void clear() {
    items_.clear();
    free_.clear();
    next_ = 1;
  }

 private:
  std::map<uint32_t, T> items_;
  std::set<uint32_t> free_;
  uint32_t next_ = 1;
};

// The same namespace with a lock of its own, for objects some ioctls look up without the
// emulator state lock: the kernel guards a file's syncobj idr with a spinlock of its own
// (drm_file's syncobj_table_lock, drm_syncobj_find()), so a lookup never waits for a CS of
// another file. Lookups hand out a reference; nothing is destroyed under the lock.
template <typename T>
class SharedHandleTable {
 public:
  uint32_t insert(std::shared_ptr<T> value) {
    std::lock_guard lk(mu_);
    return table_.insert(std::move(value));
  }
  std::shared_ptr<T> get(uint32_t id) const {
    std::lock_guard lk(mu_);
    return get_locked(id);
  }
  bool erase(uint32_t id, std::shared_ptr<T> *out) {
    std::lock_guard lk(mu_);
    return table_.erase(id, out);
  }
  size_t size() const {
    std::lock_guard lk(mu_);
    return table_.size();
  }
  // For a caller that must look up and use an object under the same lock (mutex() held).
  std::shared_ptr<T> get_locked(uint32_t id) const {
    const auto *v = table_.find(id);
    return v ? *v : nullptr;
  }
  std::mutex &mutex() const { return mu_; }

 private:
  mutable std::mutex mu_;
  HandleTable<std::shared_ptr<T>> table_;
};

}  // namespace rvgl::emu
