// copy_from_user / copy_to_user for a library that shares its address space with the caller: the
// kernel checks every pointer it is given, so the emulator goes through process_vm_readv/writev on
// its own pid, which fails with EFAULT instead of crashing on a bad address.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rvgl::emu {

// Each returns 0 or -EFAULT.
int copy_from_user(void *dst, uint64_t user_src, size_t len);
int copy_to_user(uint64_t user_dst, const void *src, size_t len);
// Copies between two caller addresses (both may be bad).
int copy_user_to_user(uint64_t user_dst, uint64_t user_src, size_t len);
// Whether [addr, addr+len) is mapped (pages present or not), like the kernel's access checks.
bool user_range_mapped(uint64_t addr, size_t len);

}  // namespace rvgl::emu
