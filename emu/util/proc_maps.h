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

// The VMAs overlapping [addr, addr+len), in address order, up to the first hole (a caller sees
// the gap). False if /proc/self/maps is unreadable. One PROCMAP_QUERY per VMA where the kernel
// has it (6.11+), so the cost does not grow with the size of the map; the text otherwise.
bool vmas_overlapping(uint64_t addr, uint64_t len, std::vector<Vma> &out);

}  // namespace rvgl::emu
