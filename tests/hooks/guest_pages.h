// Page-aligned anonymous memory standing in for guest RAM behind a userptr blob.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>

namespace rvgl::hooks_test {

struct GuestPages {
  explicit GuestPages(size_t n) : size(n) {
    ptr = static_cast<uint8_t *>(
        mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (ptr == MAP_FAILED) throw std::runtime_error("mmap");
  }
  ~GuestPages() { munmap(ptr, size); }
  GuestPages(const GuestPages &) = delete;
  GuestPages &operator=(const GuestPages &) = delete;
  uint8_t *ptr;
  size_t size;
};

}  // namespace rvgl::hooks_test
