// The GPU virtual address layout amdgpu gives every file's VM on GFX9 and later (48-bit VA).
// Sources: drivers/gpu/drm/amd/amdgpu/amdgpu_gmc.h (AMDGPU_GMC_HOLE_*), amdgpu_vm.h
// (AMDGPU_VA_RESERVED_*), amdgpu_kms.c (DEV_INFO virtual_address_* / high_va_*).
#pragma once

#include <cstdint>

namespace rvgl::emu::va {

inline constexpr uint64_t kGpuPageSize = 4096;   // AMDGPU_GPU_PAGE_SIZE
inline constexpr uint64_t kVmSize = 1ull << 48;  // 48-bit VMs (max_pfn = 1 << 36)
inline constexpr uint64_t kHoleStart = 0x0000800000000000ull;
inline constexpr uint64_t kHoleEnd = 0xffff800000000000ull;
inline constexpr uint64_t kHoleMask = 0x0000ffffffffffffull;
inline constexpr uint64_t kReservedBottom = 1ull << 16;  // AMDGPU_VA_RESERVED_BOTTOM
inline constexpr uint64_t kReservedTop =
    (1ull << 16) + (2ull << 20) + (2ull << 20);  // TRAP+SEQ64+CSA
inline constexpr uint64_t kUsableTop = kVmSize - kReservedTop;

// DEV_INFO as amdgpu_kms.c computes it from the numbers above.
inline constexpr uint64_t kVirtualAddressOffset = kReservedBottom;
inline constexpr uint64_t kVirtualAddressMax = kHoleStart < kUsableTop ? kHoleStart : kUsableTop;
inline constexpr uint64_t kHighVaOffset = kHoleEnd;
inline constexpr uint64_t kHighVaMax = kHoleEnd | kUsableTop;

}  // namespace rvgl::emu::va
