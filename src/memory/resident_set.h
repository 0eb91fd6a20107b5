// The GEM handles mapped in the context's GPU VM: the BO list of every submission, so the kernel
// keeps all of the guest's mapped memory resident (the guest's IBs may touch any of it, and the
// host cannot know which). The kernel holds it as a BO list object (KernelBoList), updated only
// when generation() moved.
#pragma once

#include <amdgpu_drm.h>

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace rvgl {

class ResidentSet {
 public:
  void add(uint32_t handle) {
    if (refs_[handle]++ == 0) {
      dirty_ = true;
      ++generation_;
    }
  }
  void remove(uint32_t handle) {
    auto it = refs_.find(handle);
    if (it == refs_.end()) return;
    if (--it->second == 0) {
      refs_.erase(it);
      dirty_ = true;
      ++generation_;
    }
  }
  std::span<const drm_amdgpu_bo_list_entry> entries() {
    if (dirty_) {
      list_.clear();
      for (const auto &[h, n] : refs_)
        list_.push_back({h, 0});
      dirty_ = false;
    }
    return list_;
  }
  size_t size() const { return refs_.size(); }
  uint64_t generation() const { return generation_; }

 private:
  std::unordered_map<uint32_t, uint32_t> refs_;  // handle -> number of VA mappings using it
  std::vector<drm_amdgpu_bo_list_entry> list_;
  bool dirty_ = false;
  uint64_t generation_ = 0;
};

}  // namespace rvgl
