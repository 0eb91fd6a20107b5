// Sole owner of a shared memory mapping of a blob's fd: unmapped exactly once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "rvgl_result.h"

namespace rvgl::guest {

class Mapping {
 public:
  Mapping() = default;
  ~Mapping() { reset(); }
  Mapping(Mapping &&o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  Mapping &operator=(Mapping &&o) noexcept {
    if (this != &o) {
      reset();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  Mapping(const Mapping &) = delete;
  Mapping &operator=(const Mapping &) = delete;

  // Maps `size` bytes of `fd` read-write and shared. The fd comes from the host, so its real size
  // is checked first: touching a mapping past the end of a shorter file would kill the guest with
  // SIGBUS instead of returning an error.
  static Result<Mapping> map_shared(int fd, size_t size);

  uint8_t *data() const { return data_; }
  size_t size() const { return size_; }
  std::span<uint8_t> bytes() const { return {data_, size_}; }
  bool valid() const { return data_ != nullptr; }
  void reset();

 private:
  Mapping(uint8_t *data, size_t size) : data_(data), size_(size) {}
  uint8_t *data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace rvgl::guest
