#include "memory/mmap_registry.h"

namespace rvgl::emu {

MmapRegistry &mmap_registry() {
  static MmapRegistry *r = new MmapRegistry;
  return *r;
}

void MmapRegistry::sweep() {
  for (auto it = entries_.begin(); it != entries_.end();)
    it = it->second.bo.expired() ? entries_.erase(it) : std::next(it);
}

uint64_t MmapRegistry::offset_of(const std::shared_ptr<BufferObject> &bo) {
  if (bo->mmap_offset()) return bo->mmap_offset();
  if (++since_sweep_ >= 256) {
    since_sweep_ = 0;
    sweep();
  }
  const uint64_t page = 4096;
  const uint64_t off = next_;
  next_ += ((bo->size() + page - 1) & ~(page - 1)) + page;  // a guard page between objects
  entries_.emplace(off, Entry{bo->size(), bo});
  bo->set_mmap_offset(off);
  return off;
}

std::shared_ptr<BufferObject> MmapRegistry::find(uint64_t offset, uint64_t len, uint64_t &inner) {
  auto it = entries_.upper_bound(offset);
  if (it == entries_.begin()) return nullptr;
  --it;
  auto bo = it->second.bo.lock();
  if (!bo) return nullptr;
  const uint64_t rel = offset - it->first;
  const uint64_t mapped = (bo->size() + 4095) & ~uint64_t{4095};
  if (rel >= mapped || len > mapped - rel) return nullptr;
  inner = rel;
  return bo;
}

}  // namespace rvgl::emu
