// The fake offsets GEM_MMAP hands out (drm_vma_offset_manager): mmap of a device fd at one maps
// that object's pages. Guarded by the emulator state lock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "memory/buffer_object.h"

namespace rvgl::emu {

class MmapRegistry {
 public:
  // The object's offset, assigned on first request.
  uint64_t offset_of(const std::shared_ptr<BufferObject> &bo);
  // The object whose range holds [offset, offset+len), and the offset inside it.
  std::shared_ptr<BufferObject> find(uint64_t offset, uint64_t len, uint64_t &inner);

 private:
  struct Entry {
    uint64_t size;
    std::weak_ptr<BufferObject> bo;
  };
  void sweep();
  // DRM_FILE_PAGE_OFFSET_START: fake offsets start above 4 GiB (include/drm/drm_vma_manager.h).
  uint64_t next_ = 0x100000000ull + 4096;
  std::map<uint64_t, Entry> entries_;
  uint32_t since_sweep_ = 0;
};

MmapRegistry &mmap_registry();

}  // namespace rvgl::emu
