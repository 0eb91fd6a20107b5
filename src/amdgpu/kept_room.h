// Places in a device's keep-until-closed list (AmdgpuDevice::kept_until_closed()), made while
// there is memory for them and used where nothing may fail: a destructor, or right after a
// kernel call that already took the memory. Places not used go back when the room dies.
#pragma once

#include <cstddef>
#include <memory>

#include "amdgpu/amdgpu_device.h"

namespace rvgl {

class KeptRoom {
 public:
  KeptRoom() = default;
  // Room for n; an empty room (false) when out of memory.
  static KeptRoom make(std::shared_ptr<AmdgpuDevice> dev, size_t n);
  KeptRoom(KeptRoom &&o) noexcept;
  KeptRoom &operator=(KeptRoom &&o) noexcept;
  KeptRoom(const KeptRoom &) = delete;
  KeptRoom &operator=(const KeptRoom &) = delete;
  ~KeptRoom();

  explicit operator bool() const { return dev_ != nullptr; }
  // Takes a place for `what` (nothing for null): it lives until the device's file is closed.
  // Allocates nothing. No place left is a caller's bug: `what` is then leaked (a small
  // allocation), not freed under the kernel.
  void keep(std::shared_ptr<const void> what) noexcept;

 private:
  void give_back() noexcept;
  std::shared_ptr<AmdgpuDevice> dev_;
  size_t left_ = 0;
};

}  // namespace rvgl
