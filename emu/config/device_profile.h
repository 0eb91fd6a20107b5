// What one emulated GPU model reports: PCI identity, DEV_INFO facts, IP blocks, packet limits.
// Values live in tables in device_profile.cpp, each with its public source.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace rvgl::emu {

struct IpBlock {
  uint32_t major = 0, minor = 0, revision = 0;  // IP discovery version
  uint32_t rings = 0;                           // kernel rings per node (0: IP present, no rings)
  uint32_t ib_start_alignment = 0, ib_size_alignment = 0;
  uint32_t max_ibs =
      0;  // IBs one CS may carry (amdgpu_ring_max_ibs: GFX 192, COMPUTE 125, else 49)
  bool present = false;      // counted by HW_IP_COUNT
  uint32_t userq_slots = 0;  // 0: no user queues for this IP
};

struct FirmwareEntry {
  uint32_t fw_type;  // AMDGPU_INFO_FW_*
  uint32_t version;
  uint32_t feature;
};

struct MmrRegister {
  uint32_t offset;  // dword offset as READ_MMR_REG takes it
  uint32_t value;
};

// SDMA count fields differ by SDMA generation; the values are field masks (count is "bytes - 1").
struct SdmaLimits {
  uint32_t copy_count_mask;
  uint32_t fill_count_mask;
  uint32_t write_count_mask;
};

struct UserqAreas {
  uint32_t gfx_shadow_size, gfx_shadow_alignment, gfx_csa_size, gfx_csa_alignment;
  uint32_t compute_eop_size, compute_eop_alignment;
  uint32_t sdma_csa_size, sdma_csa_alignment;
};

struct DeviceProfile {
  std::string_view name;     // RVGL_EMU_PROFILE value
  std::string_view aliases;  // comma separated

  uint16_t pci_vendor, pci_device, pci_subvendor, pci_subdevice;
  uint8_t pci_revision;
  uint32_t pci_class;  // 24-bit class code

  uint32_t family, chip_rev, external_rev;
  uint32_t default_xccs;
  // The part can be split into compute partitions (amdgpu_xcp.c): sysfs then reports the mode
  // and each partition's XCCs (device/compute_partition_config/xcc/num_inst).
  bool partitionable;
  uint32_t shader_engines_per_xcc, shader_arrays_per_engine, cus_per_array_per_xcc;
  uint32_t active_cus_per_xcc;  // what DEV_INFO cu_active_number counts (harvested parts)
  uint32_t wave_front_size, num_rb_pipes_per_xcc, num_tcc_blocks, num_hw_gfx_contexts;
  uint64_t min_engine_clock_khz, max_engine_clock_khz, min_memory_clock_khz, max_memory_clock_khz;
  uint32_t gpu_counter_freq_khz;
  uint64_t vram_mib, gtt_mib, visible_vram_mib;
  // What the kernel keeps pinned for itself after boot (firmware, GART table, rings; in visible
  // VRAM) and in GTT: INFO VRAM_GTT / MEMORY subtract it (adev->vram_pin_size, gart_pin_size).
  uint64_t vram_pinned_mib, gtt_pinned_mib;
  uint32_t vram_type, vram_bit_width;
  uint64_t ids_flags;
  uint32_t tcp_cache_kib, sqc_data_cache_kib, sqc_inst_cache_kib, gl1c_cache_kib, gl2c_cache_kib;
  uint64_t mall_bytes;

  IpBlock gfx, compute, sdma;
  bool sdma_rings_per_xcc;     // sdma.rings counts per XCC (partitioned parts)
  bool compute_rings_per_xcc;  // compute.rings counts per XCC
  SdmaLimits sdma_limits;
  UserqAreas userq_areas;
  uint64_t doorbell_bytes;  // size of the doorbell BAR objects are carved from

  std::span<const FirmwareEntry> firmware;
  std::span<const MmrRegister> registers;

  // SPM sample layout: 32-byte lines in the global segment and in each shader-engine segment.
  uint32_t spm_global_lines, spm_se_lines;
};

const DeviceProfile *find_profile(std::string_view name);
std::span<const DeviceProfile> all_profiles();

}  // namespace rvgl::emu
