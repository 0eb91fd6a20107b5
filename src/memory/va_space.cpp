#include "memory/va_space.h"

#include <cerrno>

#include "util/checked_math.h"

namespace rvgl {

bool VaSpace::in_range(uint64_t va, uint64_t size) const {
  auto end = checked_add(va, size);
  return size > 0 && end && va >= start_ && *end <= end_;
}

int VaSpace::check_free(uint64_t va, uint64_t size) const {
  if (size == 0 || !is_aligned(va, align_) || !is_aligned(size, align_)) return -EINVAL;
  if (!in_range(va, size)) return -ERANGE;
  const uint64_t end = va + size;
  auto it = maps_.lower_bound(va);
  if (it != maps_.end() && it->first < end) return -EEXIST;
  if (it != maps_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second.size > va) return -EEXIST;
  }
  return 0;
}

const VaMapping *VaSpace::find(uint64_t va, uint64_t size) const {
  auto end = checked_add(va, size);
  if (size == 0 || !end) return nullptr;
  auto it = maps_.upper_bound(va);
  if (it == maps_.begin()) return nullptr;
  const VaMapping &m = std::prev(it)->second;
  return *end <= m.va + m.size ? &m : nullptr;
}

void VaSpace::insert(VaMapping &&m) {
  const MemoryObject *obj = m.object.get();
  const uint64_t va = m.va;
  auto &vas = by_object_[obj];
  try {
    vas.insert(va);
    // The node is made before `m` is moved into it.
    maps_.emplace(va, std::move(m));
  } catch (...) {
    unindex(obj, va);  // drops the object's entry too if that left it empty
    throw;
  }
}

void VaSpace::unindex(const MemoryObject *obj, uint64_t va) {
  auto o = by_object_.find(obj);
  if (o == by_object_.end()) return;
  o->second.erase(va);
  if (o->second.empty()) by_object_.erase(o);
}

std::optional<VaMapping> VaSpace::take(uint64_t va, uint64_t size) {
  auto it = maps_.find(va);
  if (it == maps_.end() || it->second.size != size) return std::nullopt;
  VaMapping m = std::move(it->second);
  unindex(m.object.get(), va);
  maps_.erase(it);
  return m;
}

size_t VaSpace::count_of(const MemoryObject *obj) const {
  auto o = by_object_.find(obj);
  return o == by_object_.end() ? 0 : o->second.size();
}

}  // namespace rvgl
