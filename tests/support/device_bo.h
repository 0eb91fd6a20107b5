// A BO made straight on an AmdgpuDevice, for tests below the context (queues, health): created,
// CPU-mapped, and bound at `va` when that is not 0. The mapping goes with this object; the handle
// belongs to whoever closes it (a MemoryObject it was handed to, or the test).
#pragma once

#include <sys/mman.h>

#include <catch2/catch.hpp>

#include <cstdint>

#include "amdgpu/amdgpu_device.h"

namespace rvgl::test {

struct DeviceBo {
  AmdgpuDevice &dev;
  uint32_t handle = 0;
  uint64_t size;
  void *cpu = nullptr;
  DeviceBo(AmdgpuDevice &d, uint64_t bytes, uint64_t domain, uint64_t va) : dev(d), size(bytes) {
    REQUIRE(dev.gem_create(bytes, 4096, domain, 0, &handle) == 0);
    uint64_t off = 0;
    REQUIRE(dev.gem_mmap_offset(handle, &off) == 0);
    cpu = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, dev.fd(), off);
    REQUIRE(cpu != MAP_FAILED);
    if (va)
      REQUIRE(dev.gem_va(AMDGPU_VA_OP_MAP, handle, va, 0, bytes,
                         AMDGPU_VM_PAGE_READABLE | AMDGPU_VM_PAGE_WRITEABLE) == 0);
  }
  ~DeviceBo() { munmap(cpu, size); }
  DeviceBo(const DeviceBo &) = delete;
  DeviceBo &operator=(const DeviceBo &) = delete;
  template <class T>
  T *ptr() const {
    return static_cast<T *>(cpu);
  }
};

}  // namespace rvgl::test
