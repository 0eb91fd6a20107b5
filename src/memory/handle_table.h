// Per-context handles for guest-visible objects: small integers >= 1 indexing a private table.
// No host pointer, fd or kernel handle is ever derived from or exposed as a handle.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace rvgl {

template <class T>
class HandleTable {
 public:
  explicit HandleTable(uint32_t capacity) : capacity_(capacity) {}

  // 0 when the table is full.
  uint32_t insert(std::shared_ptr<T> v) {
    uint32_t idx;
    if (!free_.empty()) {
      idx = free_.back();
      free_.pop_back();
      slots_[idx] = std::move(v);
    } else {
      if (slots_.size() >= capacity_) return 0;
      idx = static_cast<uint32_t>(slots_.size());
      // Room for every slot on the free list: remove() allocates nothing, so a destroy or a free
      // cannot fail half way (with the entry taken out) for want of memory.
      if (free_.capacity() <= slots_.size()) free_.reserve(2 * slots_.size() + 1);
      slots_.push_back(std::move(v));
    }
    ++count_;
    return idx + 1;
  }

  // nullptr for 0, out-of-range and free handles.
  T *get(uint32_t handle) const {
    if (handle == 0 || handle > slots_.size()) return nullptr;
    return slots_[handle - 1].get();
  }
  std::shared_ptr<T> get_shared(uint32_t handle) const {
    if (handle == 0 || handle > slots_.size()) return nullptr;
    return slots_[handle - 1];
  }

  std::shared_ptr<T> remove(uint32_t handle) {
    if (!get(handle)) return nullptr;
    auto v = std::move(slots_[handle - 1]);
    free_.push_back(handle - 1);
    --count_;
    return v;
  }

  uint32_t size() const { return count_; }
  void clear() {
    slots_.clear();
    free_.clear();
    count_ = 0;
  }
  template <class F>
  void for_each(F &&f) const {
    for (uint32_t i = 0; i < slots_.size(); ++i)
      if (slots_[i]) f(i + 1, *slots_[i]);
  }

 private:
  uint32_t capacity_;
  uint32_t count_ = 0;
  std::vector<std::shared_ptr<T>> slots_;
  std::vector<uint32_t> free_;
};

}  // namespace rvgl
