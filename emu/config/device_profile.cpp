#include "config/device_profile.h"

#include <amdgpu_drm.h>

#include "amdgpu/uapi/amdgpu_drm_ext.h"

namespace rvgl::emu {

namespace {

// Firmware versions are representative of shipping parts (what `amdgpu_firmware_info` in debugfs
// prints); nothing keys off their exact values.
constexpr FirmwareEntry kGfx1100Firmware[] = {
    {AMDGPU_INFO_FW_GFX_ME, 0x00000605, 38},  {AMDGPU_INFO_FW_GFX_PFP, 0x00000623, 38},
    {AMDGPU_INFO_FW_GFX_MEC, 0x00000546, 38}, {AMDGPU_INFO_FW_GFX_RLC, 0x00000083, 1},
    {AMDGPU_INFO_FW_SDMA, 0x00000014, 60},    {AMDGPU_INFO_FW_SMC, 0x004e5900, 0},
    {AMDGPU_INFO_FW_SOS, 0x0021003d, 0},      {AMDGPU_INFO_FW_VCN, 0x0510a003, 0},
};

constexpr FirmwareEntry kGfx942Firmware[] = {
    {AMDGPU_INFO_FW_GFX_MEC, 0x0000009a, 50}, {AMDGPU_INFO_FW_GFX_RLC, 0x00000009, 1},
    {AMDGPU_INFO_FW_SDMA, 0x00000012, 18},    {AMDGPU_INFO_FW_SMC, 0x00556300, 0},
    {AMDGPU_INFO_FW_SOS, 0x00270046, 0},
};

// READ_MMR_REG answers only registers on the kernel's allow list (soc21.c / soc15.c
// *_allowed_read_registers); GB_ADDR_CONFIG (0x263e) is the one libdrm's device init reads.
// The GB_ADDR_CONFIG values decode (Mesa ac_gpu_info.c) to the parts' pipe/packer layout.
constexpr MmrRegister kGfx1100Registers[] = {
    {0x263e, 0x00000545},  // GB_ADDR_CONFIG: 32 pipes, 256 B interleave, 32 packers
    {0x2004, 0x00003028},  // GRBM_STATUS (idle)
    {0x2002, 0x00000000},  // GRBM_STATUS2
};

constexpr MmrRegister kGfx942Registers[] = {
    {0x263e, 0x2a114042},  // GB_ADDR_CONFIG (gfx9 layout)
    {0x2004, 0x00003028},  // GRBM_STATUS (idle)
    {0x2002, 0x00000000},  // GRBM_STATUS2
};

// HW_IP_INFO alignments as amdgpu_hw_ip_info() reports them (drivers/gpu/drm/amd/amdgpu/
// amdgpu_kms.c): GFX/compute IBs 32-byte start and size, SDMA 256-byte start, 4-byte size.
constexpr DeviceProfile kProfiles[] = {
    {
        .name = "gfx1100",
        .aliases = "rdna3,navi31,gfx11",
        // PCI 1002:744C revision C8 = RX 7900 XTX (libdrm data/amdgpu.ids).
        .pci_vendor = 0x1002,
        .pci_device = 0x744c,
        .pci_subvendor = 0x1002,
        .pci_subdevice = 0x0e3b,
        .pci_revision = 0xc8,
        .pci_class = 0x030000,  // VGA compatible controller
        .family = RVGL_AMDGPU_FAMILY_GC_11_0_0,
        .chip_rev = 0x00,
        .external_rev = 0x01,  // soc21.c: GC 11.0.0 external_rev_id = rev_id + 0x1
        .default_xccs = 1,
        .partitionable = false,
        // Navi31: 6 shader engines x 2 shader arrays x 8 CUs = 96 CUs, wave32.
        .shader_engines_per_xcc = 6,
        .shader_arrays_per_engine = 2,
        .cus_per_array_per_xcc = 8,
        .active_cus_per_xcc = 96,
        .wave_front_size = 32,
        .num_rb_pipes_per_xcc = 24,
        .num_tcc_blocks = 16,
        .num_hw_gfx_contexts = 8,
        .min_engine_clock_khz = 500000,
        .max_engine_clock_khz = 2500000,
        .min_memory_clock_khz = 96000,
        .max_memory_clock_khz = 1250000,  // 20 Gbps GDDR6
        .gpu_counter_freq_khz = 100000,
        .vram_mib = 24576,  // 24 GiB GDDR6, 384-bit
        .gtt_mib = 16384,
        .visible_vram_mib = 24576,  // resizable BAR
        // Representative of a headless RX 7900 XTX after boot (PSP TMR, discovery and firmware
        // reservations, GART table, MES/CSA); nothing keys off the exact value.
        .vram_pinned_mib = 64,
        .gtt_pinned_mib = 2,
        .vram_type = AMDGPU_VRAM_TYPE_GDDR6,
        .vram_bit_width = 384,
        .ids_flags = AMDGPU_IDS_FLAGS_PREEMPTION,
        .tcp_cache_kib = 32,
        .sqc_data_cache_kib = 16,
        .sqc_inst_cache_kib = 32,
        .gl1c_cache_kib = 256,
        .gl2c_cache_kib = 6144,
        .mall_bytes = 96ull << 20,  // 96 MiB Infinity Cache
        // GC 11.0.0 with one GFX ring and eight kernel compute queues (amdgpu.num_kcq default 8);
        // SDMA 6.0.0 with two engines. User queues for COMPUTE and SDMA.
        .gfx = {11, 0, 0, 1, 32, 32, 192, true, 0},
        .compute = {11, 0, 0, 8, 32, 32, 125, true, 8},
        .sdma = {6, 0, 0, 2, 256, 4, 49, true, 8},
        .sdma_rings_per_xcc = false,
        .compute_rings_per_xcc = false,
        // sdma_v6_0_0_pkt_open.h: COPY_LINEAR count 30 bits; CONST_FILL count 22 bits;
        // WRITE_UNTILED count 20 bits.
        .sdma_limits = {0x3fffffff, 0x003fffff, 0x000fffff},
        // GFX11_MEC_HPD_SIZE is 2048 (gfx_v11_0.c); shadow/CSA sizes from gfx_v11_0 shadow info.
        .userq_areas = {0x1b000, 4096, 0x2000, 4096, 2048, 256, 32, 4},
        .doorbell_bytes = 8ull << 20,
        .firmware = kGfx1100Firmware,
        .registers = kGfx1100Registers,
        // Mesa ac_spm.c: the global segment opens with a 64-bit timestamp (4 x u16); one more
        // line of global counters; one line per shader engine.
        .spm_global_lines = 2,
        .spm_se_lines = 1,
    },
    {
        .name = "gfx942",
        .aliases = "cdna3,mi300x,gfx9.4.3",
        // PCI 1002:74A1 revision 00 = MI300X (libdrm data/amdgpu.ids).
        .pci_vendor = 0x1002,
        .pci_device = 0x74a1,
        .pci_subvendor = 0x1002,
        .pci_subdevice = 0x74a1,
        .pci_revision = 0x00,
        .pci_class = 0x120000,  // processing accelerator
        .family = RVGL_AMDGPU_FAMILY_AI,
        .chip_rev = 0x00,
        .external_rev = 0x46,
        // MI300X in SPX mode: 8 XCDs (XCCs), 38 active CUs each = 304 CUs, wave64.
        .default_xccs = 8,
        .partitionable = true,
        .shader_engines_per_xcc = 4,
        .shader_arrays_per_engine = 1,
        .cus_per_array_per_xcc = 10,
        .active_cus_per_xcc = 38,
        .wave_front_size = 64,
        .num_rb_pipes_per_xcc = 0,  // no render backends on CDNA
        .num_tcc_blocks = 16,
        .num_hw_gfx_contexts = 0,
        .min_engine_clock_khz = 500000,
        .max_engine_clock_khz = 2100000,
        .min_memory_clock_khz = 900000,
        .max_memory_clock_khz = 1300000,
        .gpu_counter_freq_khz = 100000,
        .vram_mib = 196608,  // 192 GiB HBM3, 8192-bit
        .gtt_mib = 65536,
        .visible_vram_mib = 196608,
        // Representative of an MI300X in SPX mode (eight XCCs' firmware and MES areas).
        .vram_pinned_mib = 192,
        .gtt_pinned_mib = 8,
        .vram_type = AMDGPU_VRAM_TYPE_HBM,
        .vram_bit_width = 8192,
        .ids_flags = 0,
        .tcp_cache_kib = 16,
        .sqc_data_cache_kib = 16,
        .sqc_inst_cache_kib = 64,
        .gl1c_cache_kib = 0,
        .gl2c_cache_kib = 4096,
        .mall_bytes = 256ull << 20,  // 256 MiB Infinity Cache
        // GC 9.4.3 (the IP behind the gfx942 target): the GFX block exists but has no GFX rings;
        // eight compute rings and two SDMA 4.4.2 engines per XCC; no user queues.
        .gfx = {9, 4, 3, 0, 32, 32, 192, true, 0},
        .compute = {9, 4, 3, 8, 32, 32, 125, true, 0},
        .sdma = {4, 4, 2, 2, 256, 4, 49, true, 0},
        .sdma_rings_per_xcc = true,
        .compute_rings_per_xcc = false,
        // vega10_sdma_pkt_open.h family (SDMA 4.x): COPY_LINEAR and CONST_FILL counts 22 bits.
        .sdma_limits = {0x003fffff, 0x003fffff, 0x000fffff},
        .userq_areas = {},
        .doorbell_bytes = 8ull << 20,
        .firmware = kGfx942Firmware,
        .registers = kGfx942Registers,
        .spm_global_lines = 2,
        .spm_se_lines = 1,
    },
};

bool matches(const DeviceProfile &p, std::string_view name) {
  if (p.name == name) return true;
  std::string_view rest = p.aliases;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    if (rest.substr(0, comma) == name) return true;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

const DeviceProfile *find_profile(std::string_view name) {
  for (const auto &p : kProfiles)
    if (matches(p, name)) return &p;
  return nullptr;
}

std::span<const DeviceProfile> all_profiles() {
  return kProfiles;
}

}  // namespace rvgl::emu
