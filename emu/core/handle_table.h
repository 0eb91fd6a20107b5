// A per-file handle namespace that hands out the lowest free id from 1, as the kernel's idr does
// (idr_alloc(idr, ptr, 1, 0, ...) in drm_gem_handle_create_tail(), drm_syncobj_get_handle(),
// amdgpu_ctx_alloc()), so handle numbers look like a real driver's and get reused the same way.
// Ids are dense, so a lookup is an index into one array, as the idr's radix tree is for the few
// dozen handles a file has (one node of 64 slots): a CS that finds its objects does not chase a
// tree's nodes through memory that a real kernel would find in one or two cache lines.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace rvgl::emu {

template <typename T>
class HandleTable {
 public:
  uint32_t insert(T value) {
    // The lowest empty slot; none below the highest id when every slot is taken.
    auto slot = count_ == slots_.size()
                    ? slots_.end()
                    : std::find_if(slots_.begin(), slots_.end(), [](const auto &s) { return !s; });
    if (slot == slots_.end()) slot = slots_.insert(slots_.end(), std::nullopt);
    slot->emplace(std::move(value));
    ++count_;
    return static_cast<uint32_t>(slot - slots_.begin()) + 1;
  }

  const T *find(uint32_t id) const {
    if (id == 0 || id > slots_.size() || !slots_[id - 1]) return nullptr;
    return &*slots_[id - 1];
  }
  T *find(uint32_t id) { return const_cast<T *>(std::as_const(*this).find(id)); }

  bool erase(uint32_t id, T *out = nullptr) {
    T *v = find(id);
    if (!v) return false;
    if (out) *out = std::move(*v);
    slots_[id - 1].reset();
    --count_;
    // The array ends at the highest live id: empty slots at its end go.
    while (!slots_.empty() && !slots_.back())
      slots_.pop_back();
    return true;
  }

  size_t size() const { return count_; }
  // f(id, value) for each handle, lowest id first.
  template <class F>
  void for_each(F f) {
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i]) f(static_cast<uint32_t>(i + 1), *slots_[i]);
  }
  void clear() {
    slots_.clear();
    count_ = 0;
  }

 private:
  std::vector<std::optional<T>> slots_;  // slots_[id - 1]
  size_t count_ = 0;                     // live handles: fewer than slots_ means a hole below
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
  uint32_t insert_locked(std::shared_ptr<T> value) { return table_.insert(std::move(value)); }
  bool erase_locked(uint32_t id, std::shared_ptr<T> *out) { return table_.erase(id, out); }
  std::mutex &mutex() const { return mu_; }

 private:
  mutable std::mutex mu_;
  HandleTable<std::shared_ptr<T>> table_;
};

}  // namespace rvgl::emu
