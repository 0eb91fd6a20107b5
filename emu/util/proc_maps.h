// The caller's memory map as the kernel's VMA walk sees it, for the checks GEM_USERPTR makes
// (every page mapped, anonymous when ANONONLY, writable unless READONLY).
#pragma once

#include <cstdint>
#include <vector>

namespace rvgl::emu {

struct Vma {
  uint64_t start, end;
  bool readable, writable;
  bool file_backed;  // the VMA has a vm_file (regular files, memfds, shared anonymous memory)
};

// The VMAs overlapping [addr, addr+len), in address order. False if /proc/self/maps is unreadable.
bool vmas_overlapping(uint64_t addr, uint64_t len, std::vector<Vma> &out);

}  // namespace rvgl::emu
