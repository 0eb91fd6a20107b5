// A per-file handle namespace that hands out the lowest free id from 1, as the kernel's idr does,
// so handle numbers look like a real driver's (and get reused the same way).
#pragma once

#include <cstdint>
#include <map>
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

}  // namespace rvgl::emu
