// Unmapped addresses for the EFAULT tests, made so that no other thread can fill them first.
//
// A page mapped and unmapped again is free for the next mmap of any thread in the process: the
// emulator's own workers, a sanitizer runtime's bookkeeping (TSan maps trace memory as threads
// run). A test that unmaps a range and then expects EFAULT for it therefore fails whenever such
// an mmap lands in between; under TSan it did.
#pragma once

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <optional>

namespace rvgl::emu_test {

// An address no mapping of this process covers, now or later: x86-64 mmap returns addresses
// above 47 bits only to a caller whose hint asks for them (Documentation/arch/x86/x86_64/
// 5level-paging.rst), and with 4-level paging they are past the end of user space.
inline void *never_mapped() {
  return reinterpret_cast<void *>(uintptr_t{1} << 47);
}

// Whether the page holding p is unmapped: mincore fails with ENOMEM for an unmapped page.
inline bool page_unmapped(const void *p) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  unsigned char vec = 0;
  const uintptr_t at = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  return mincore(reinterpret_cast<void *>(at), page, &vec) != 0 && errno == ENOMEM;
}

// Runs attempt(region) on a fresh read-write anonymous region of `pages` pages whose page `hole`
// is unmapped, and returns its result once an attempt ended with the hole still unmapped (so it
// was unmapped throughout, short of another thread mapping and unmapping one page inside the few
// calls the attempt makes). An attempt whose hole was taken proves nothing and runs again on a
// new region; nullopt after 10 such.
template <class Attempt>
auto with_hole(size_t pages, size_t hole, Attempt attempt)
    -> std::optional<decltype(attempt(static_cast<uint8_t *>(nullptr)))> {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (int tries = 0; tries < 10; ++tries) {
    void *m =
        mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return std::nullopt;
    auto *region = static_cast<uint8_t *>(m);
    uint8_t *gap = region + hole * page;
    if (munmap(gap, page) != 0) {
      munmap(region, pages * page);
      return std::nullopt;
    }
    auto result = attempt(region);
    const bool held = page_unmapped(gap);
    // Only our own pages: a page someone else mapped into the hole is theirs.
    munmap(region, hole * page);
    if (pages > hole + 1) munmap(gap + page, (pages - hole - 1) * page);
    if (held) return result;
  }
  return std::nullopt;
}

}  // namespace rvgl::emu_test
