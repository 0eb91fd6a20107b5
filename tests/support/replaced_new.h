// The replaceable global allocation functions ([new.delete]), every form, for a test binary that
// decides for itself whether an allocation succeeds. Include in exactly one file of the binary,
// which defines rvgl::test::replaced_allocate(). malloc and free underneath (posix_memalign for
// the over-aligned forms), so the sanitizers see one matching pair whichever form allocated and
// whichever freed.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace rvgl::test {

// size bytes aligned to align (0: the default), or nullptr: the allocation fails (std::bad_alloc
// from the throwing forms, nullptr from the nothrow ones).
void *replaced_allocate(std::size_t size, std::size_t align) noexcept;

// What replaced_allocate() calls once it lets an allocation through.
inline void *malloc_aligned(std::size_t size, std::size_t align) noexcept {
  if (size == 0) size = 1;
  if (align <= alignof(std::max_align_t)) return std::malloc(size);
  void *p = nullptr;
  return posix_memalign(&p, align, size) == 0 ? p : nullptr;
}

inline void *replaced_allocate_or_throw(std::size_t size, std::size_t align) {
  if (void *p = replaced_allocate(size, align)) return p;
  throw std::bad_alloc();
}

}  // namespace rvgl::test

// g++ sees free() inlined where a new-expression of the including file allocated and would call
// it a mismatch: it is this program's own pair.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void *operator new(std::size_t n) {
  return rvgl::test::replaced_allocate_or_throw(n, 0);
}
void *operator new[](std::size_t n) {
  return rvgl::test::replaced_allocate_or_throw(n, 0);
}
void *operator new(std::size_t n, std::align_val_t a) {
  return rvgl::test::replaced_allocate_or_throw(n, static_cast<std::size_t>(a));
}
void *operator new[](std::size_t n, std::align_val_t a) {
  return rvgl::test::replaced_allocate_or_throw(n, static_cast<std::size_t>(a));
}
void *operator new(std::size_t n, const std::nothrow_t &) noexcept {
  return rvgl::test::replaced_allocate(n, 0);
}
void *operator new[](std::size_t n, const std::nothrow_t &) noexcept {
  return rvgl::test::replaced_allocate(n, 0);
}
void *operator new(std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  return rvgl::test::replaced_allocate(n, static_cast<std::size_t>(a));
}
void *operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  return rvgl::test::replaced_allocate(n, static_cast<std::size_t>(a));
}
void operator delete(void *p) noexcept {
  std::free(p);
}
void operator delete[](void *p) noexcept {
  std::free(p);
}
void operator delete(void *p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void *p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void *p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void *p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void *p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void *p, const std::nothrow_t &) noexcept {
  std::free(p);
}
void operator delete[](void *p, const std::nothrow_t &) noexcept {
  std::free(p);
}
void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept {
  std::free(p);
}
void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept {
  std::free(p);
}
