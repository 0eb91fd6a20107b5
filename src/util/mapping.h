// An owned memory mapping: unmapped exactly once, movable, never copied.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <utility>

namespace rvgl {

class Mapping {
 public:
  Mapping() = default;
  Mapping(void *addr, size_t size) : addr_(addr), size_(size) {}
  ~Mapping() { reset(); }
  Mapping(Mapping &&o) noexcept
      : addr_(std::exchange(o.addr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  Mapping &operator=(Mapping &&o) noexcept {
    if (this != &o) {
      reset();
      addr_ = std::exchange(o.addr_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  Mapping(const Mapping &) = delete;
  Mapping &operator=(const Mapping &) = delete;

  // Maps fd [offset, offset + size) shared; an invalid Mapping on failure (errno set).
  static Mapping map_shared(int fd, size_t size, int prot, off_t offset = 0) {
    void *p = ::mmap(nullptr, size, prot, MAP_SHARED, fd, offset);
    return p == MAP_FAILED ? Mapping() : Mapping(p, size);
  }

  void *get() const { return addr_; }
  template <class T>
  T *as() const {
    return static_cast<T *>(addr_);
  }
  size_t size() const { return size_; }
  bool valid() const { return addr_ != nullptr; }
  void reset() {
    if (addr_) ::munmap(addr_, size_);
    addr_ = nullptr;
    size_ = 0;
  }

 private:
  void *addr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace rvgl
