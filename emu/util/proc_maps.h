// The caller's memory map as the kernel's VMA walk sees it, for the checks a userptr object's
// pages pass when GEM_USERPTR validates them and on every CS that lists the object (every page
// mapped, anonymous when ANONONLY, writable unless READONLY).
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

// amdgpu_ttm_tt_get_user_pages()'s answer for [addr, addr+len) as the caller's map is now: 0,
// -EFAULT (a page not mapped, or not readable: hmm_vma_walk_test()), or -EPERM (a file-backed VMA
// under ANONONLY; not writable unless READONLY: hmm_vma_fault() refuses a write fault in a VMA
// without VM_WRITE, mm/hmm.c since Linux 5.7, where older kernels gave EFAULT).
int user_pages_error(uint64_t addr, uint64_t len, bool readonly, bool anon_only);

}  // namespace rvgl::emu
