// CPU mappings of blobs made through a render node's fd, each unmapped exactly once through the
// same VirtgpuSyscalls that made it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <utility>

#include "rvgl_virtgpu_syscalls.h"

namespace rvgl::guest::virtgpu {

class DeviceMapping {
 public:
  DeviceMapping() = default;
  DeviceMapping(VirtgpuSyscalls &sys, void *addr, size_t size)
      : sys_(&sys), addr_(static_cast<uint8_t *>(addr)), size_(size) {}
  ~DeviceMapping() { reset(); }
  DeviceMapping(DeviceMapping &&o) noexcept
      : sys_(std::exchange(o.sys_, nullptr)),
        addr_(std::exchange(o.addr_, nullptr)),
        size_(std::exchange(o.size_, 0)) {}
  DeviceMapping &operator=(DeviceMapping &&o) noexcept {
    if (this != &o) {
      reset();
      sys_ = std::exchange(o.sys_, nullptr);
      addr_ = std::exchange(o.addr_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  DeviceMapping(const DeviceMapping &) = delete;
  DeviceMapping &operator=(const DeviceMapping &) = delete;

  bool valid() const { return addr_ != nullptr; }
  std::span<uint8_t> bytes() const { return {addr_, size_}; }
  void reset() {
    if (addr_) (void)sys_->munmap(addr_, size_);
    addr_ = nullptr;
    size_ = 0;
  }

 private:
  VirtgpuSyscalls *sys_ = nullptr;
  uint8_t *addr_ = nullptr;
  size_t size_ = 0;
};

// The mappings of one render node, by GEM handle: a mapping belongs to the handle (it is made from
// the handle's offset on the node), not to whichever Blob value refers to it.
class MappingTable {
 public:
  // The mapping of `handle`, empty when it has none.
  std::span<uint8_t> find(uint32_t handle) const {
    auto it = by_handle_.find(handle);
    return it == by_handle_.end() ? std::span<uint8_t>() : it->second.bytes();
  }
  std::span<uint8_t> add(uint32_t handle, DeviceMapping m) {
    auto &slot = by_handle_[handle];
    slot = std::move(m);
    return slot.bytes();
  }
  void remove(uint32_t handle) { by_handle_.erase(handle); }
  void clear() { by_handle_.clear(); }
  size_t size() const { return by_handle_.size(); }

 private:
  std::map<uint32_t, DeviceMapping> by_handle_;
};

}  // namespace rvgl::guest::virtgpu
