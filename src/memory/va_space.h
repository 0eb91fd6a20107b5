// The guest's part of its context's GPU VA space: which ranges are mapped to which object.
// Enforces range, alignment and no-overlap before anything reaches the kernel.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "memory/memory_object.h"

namespace rvgl {

struct VaMapping {
  uint64_t va;
  uint64_t size;
  uint64_t offset;  // into the object
  uint32_t flags;   // RVGL_VA_FLAG_*
  std::shared_ptr<MemoryObject> object;
  uint64_t pieces = 0;  // kernel mappings it made (one per piece of the object it covers)
};

class VaSpace {
 public:
  VaSpace(uint64_t start, uint64_t end, uint64_t alignment)
      : start_(start), end_(end), align_(alignment) {}

  uint64_t start() const { return start_; }
  uint64_t end() const { return end_; }
  uint64_t alignment() const { return align_; }

  // 0, -EINVAL (size 0 or misaligned), -ERANGE (outside [start, end)), -EEXIST (overlap).
  int check_free(uint64_t va, uint64_t size) const;
  // [va, va + size) inside [start, end) (no alignment or overlap check).
  bool in_range(uint64_t va, uint64_t size) const;

  // The one mapping that holds all of [va, va + size), or null (size 0, overflow, unmapped, or the
  // range crosses into a neighbouring mapping).
  const VaMapping *find(uint64_t va, uint64_t size) const;

  // All or nothing: if it runs out of memory (thrown on), the space is as it was and `m` is still
  // the caller's, whose kernel mappings must then be undone.
  void insert(VaMapping &&m);
  // Removes and returns the mapping starting at va with exactly this size.
  std::optional<VaMapping> take(uint64_t va, uint64_t size);
  // Removes every mapping of obj, handing each to f: O(k log n) for its k mappings. Allocates
  // nothing: a detach or a BO_FREE cannot fail half way for want of memory.
  template <class F>
  void take_object(const MemoryObject *obj, F &&f) {
    auto o = by_object_.find(obj);
    if (o == by_object_.end()) return;
    const std::set<uint64_t> vas = std::move(o->second);
    by_object_.erase(o);
    for (uint64_t va : vas) {
      auto it = maps_.find(va);
      if (it == maps_.end()) continue;  // cannot happen: both indexes change together
      VaMapping m = std::move(it->second);
      maps_.erase(it);
      f(m);
    }
  }
  size_t count_of(const MemoryObject *obj) const;
  // Removes every mapping, handing each to f. Allocates nothing: a context's end cannot fail.
  template <class F>
  void take_all(F &&f) {
    by_object_.clear();
    while (!maps_.empty()) {
      VaMapping m = std::move(maps_.begin()->second);
      maps_.erase(maps_.begin());
      f(m);
    }
  }

  size_t count() const { return maps_.size(); }

 private:
  uint64_t start_, end_, align_;
  void unindex(const MemoryObject *obj, uint64_t va);

  std::map<uint64_t, VaMapping> maps_;  // keyed by va
  // The same mappings by object: unref and BO_FREE find an object's mappings without a scan.
  std::map<const MemoryObject *, std::set<uint64_t>> by_object_;
};

}  // namespace rvgl
