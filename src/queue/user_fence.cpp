#include "queue/user_fence.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace rvgl {

std::unique_ptr<UserFence> UserFence::create(std::shared_ptr<AmdgpuDevice> dev, int *err) {
  // The kernel wants exactly one page (its PAGE_SIZE, the host's).
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint32_t handle = 0;
  if ((*err = dev->gem_create(page, page, AMDGPU_GEM_DOMAIN_GTT, 0, &handle))) return nullptr;
  std::unique_ptr<UserFence> f(new UserFence(dev, handle));
  uint64_t offset = 0;
  if ((*err = dev->gem_mmap_offset(handle, &offset))) return nullptr;
  f->map_ = Mapping::map_shared(dev->fd(), page, PROT_READ, static_cast<off_t>(offset));
  if (!f->map_.valid()) {
    *err = errno ? -errno : -ENOMEM;
    return nullptr;
  }
  *err = 0;
  return f;
}

UserFence::~UserFence() {
  // A job still in flight keeps its own reference to the object in the kernel.
  map_.reset();
  dev_->gem_close(handle_);
}

uint64_t UserFence::read() const {
  // The GPU's write is one 64-bit store (AMDGPU_FENCE_FLAG_64BIT); acquire orders what the job
  // wrote before its fence ahead of what the reader does next.
  auto *p = reinterpret_cast<uint64_t *>(map_.as<uint8_t>() + kOffset);
  return std::atomic_ref<uint64_t>(*p).load(std::memory_order_acquire);
}

}  // namespace rvgl
