#include "memory/object_registry.h"

#include <new>

#include "memory/memory_object.h"

namespace rvgl {

void ObjectRegistry::add(const std::shared_ptr<MemoryObject> &obj) {
  std::lock_guard lk(mu_);
  add_locked(obj);
}

void ObjectRegistry::add_locked(const std::shared_ptr<MemoryObject> &obj) {
  // All or nothing: out of memory part way, the entries made go again, and the object, with no
  // registry, closes its own handles (an entry left would name a freed object).
  const auto &segs = obj->segments();
  size_t made = 0;
  try {
    for (; made < segs.size(); ++made)
      handles_[segs[made].handle] = Owner{obj.get(), obj};
    if (obj->blob_id()) blob_ids_[obj->blob_id()] = obj.get();
  } catch (const std::bad_alloc &) {
    for (size_t i = 0; i < made; ++i)
      handles_.erase(segs[i].handle);
    throw;
  }
  obj->set_registry(shared_from_this());
}

void ObjectRegistry::release(const MemoryObject &obj) {
  std::lock_guard lk(mu_);
  for (const MemoryObject::Segment &s : obj.segments()) {
    auto it = handles_.find(s.handle);
    // Not ours any more: an import took the handle over while we were dying.
    if (!s.handle || it == handles_.end() || it->second.raw != &obj) continue;
    handles_.erase(it);
    dev_->gem_close(s.handle);
  }
  if (obj.blob_id()) {
    auto it = blob_ids_.find(obj.blob_id());
    if (it != blob_ids_.end() && it->second == &obj) blob_ids_.erase(it);
  }
}

bool ObjectRegistry::blob_id_in_use(uint64_t blob_id) const {
  std::lock_guard lk(mu_);
  return blob_ids_.count(blob_id) != 0;
}

size_t ObjectRegistry::blob_ids() const {
  std::lock_guard lk(mu_);
  return blob_ids_.size();
}

size_t ObjectRegistry::handles() const {
  std::lock_guard lk(mu_);
  return handles_.size();
}

}  // namespace rvgl
