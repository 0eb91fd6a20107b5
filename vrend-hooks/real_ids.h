// Context and resource ids the real library holds. virtio-gpu has one id namespace per kind
// shared by every context type, so before taking an id for ourselves we check it is not the real
// library's, and the other way round. We see every call that creates or frees one, since they
// all pass through our exported symbols.
#pragma once

#include <cstdint>
#include <unordered_set>

namespace rvgl::hooks {

class RealIds {
 public:
  bool has_context(uint32_t id) const { return contexts_.count(id) != 0; }
  bool has_resource(uint32_t id) const { return resources_.count(id) != 0; }
  void add_context(uint32_t id) { contexts_.insert(id); }
  void add_resource(uint32_t id) { resources_.insert(id); }
  void remove_context(uint32_t id) { contexts_.erase(id); }
  void remove_resource(uint32_t id) { resources_.erase(id); }
  void clear() {
    contexts_.clear();
    resources_.clear();
  }

 private:
  std::unordered_set<uint32_t> contexts_;
  std::unordered_set<uint32_t> resources_;
};

}  // namespace rvgl::hooks
