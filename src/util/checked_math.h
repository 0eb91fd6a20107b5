// Arithmetic on guest-controlled values: every sum and product is overflow-checked.
#pragma once

#include <cstdint>
#include <optional>

namespace rvgl {

inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

constexpr bool is_pow2(uint64_t v) {
  return v && !(v & (v - 1));
}

// a is a multiple of align (align a power of two).
constexpr bool is_aligned(uint64_t a, uint64_t align) {
  return (a & (align - 1)) == 0;
}

// [offset, offset + size) lies within [0, limit), with size > 0 and no wrap.
inline bool range_within(uint64_t offset, uint64_t size, uint64_t limit) {
  auto end = checked_add(offset, size);
  return size > 0 && end && *end <= limit;
}

}  // namespace rvgl
