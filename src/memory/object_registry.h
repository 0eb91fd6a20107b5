// Who owns each kernel handle of one context, and which blob ids name a living object.
//
// The kernel hands back an existing GEM handle, without a new reference, when a file imports a
// dma-buf it already has a handle for (drm_gem_prime_fd_to_handle finds it in the file's prime
// lookup cache). Two MemoryObjects on that handle would both close it, so every handle has exactly
// one owning object, recorded here, and only the registry closes handles. Objects may die on
// another thread (an SPM worker holding its destination), hence the lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "amdgpu/amdgpu_device.h"

namespace rvgl {

class MemoryObject;

class ObjectRegistry : public std::enable_shared_from_this<ObjectRegistry> {
 public:
  // Always owned by a shared_ptr (objects keep it alive).
  static std::shared_ptr<ObjectRegistry> create(std::shared_ptr<AmdgpuDevice> dev) {
    return std::shared_ptr<ObjectRegistry>(new ObjectRegistry(std::move(dev)));
  }

  // Records obj as the owner of its handles (and of its blob id, when it has one).
  void add(const std::shared_ptr<MemoryObject> &obj);
  // Closes the handles obj owns and forgets it; handles another object took over stay open.
  void release(const MemoryObject &obj);

  // PRIME_FD_TO_HANDLE of fd. *owner is the living object that already owns the handle (share it),
  // else null and the caller must make an object for *handle and add() it before unlocking: the
  // lock is held until `adopt` returns. A handle whose owner is dying is taken over by the new
  // object (the dying one will not close it).
  template <class Adopt>
  int import(int fd, uint32_t *handle, std::shared_ptr<MemoryObject> *owner, Adopt &&adopt) {
    std::lock_guard lk(mu_);
    if (int err = dev_->prime_import(fd, handle)) return err;
    auto it = handles_.find(*handle);
    if (it != handles_.end()) {
      if ((*owner = it->second.owner.lock())) return 0;
      handles_.erase(it);  // taken over: its dying owner no longer closes it
    }
    *owner = nullptr;
    return adopt(*handle);
  }

  // True while a living object was created with this blob id.
  bool blob_id_in_use(uint64_t blob_id) const;
  size_t blob_ids() const;
  size_t handles() const;

 private:
  explicit ObjectRegistry(std::shared_ptr<AmdgpuDevice> dev) : dev_(std::move(dev)) {}
  struct Owner {
    const MemoryObject *raw;
    std::weak_ptr<MemoryObject> owner;
  };
  void add_locked(const std::shared_ptr<MemoryObject> &obj);

  std::shared_ptr<AmdgpuDevice> dev_;
  // Recursive: import()'s `adopt` calls add() with the lock held.
  mutable std::recursive_mutex mu_;
  std::unordered_map<uint32_t, Owner> handles_;
  std::unordered_map<uint64_t, const MemoryObject *> blob_ids_;
};

}  // namespace rvgl
