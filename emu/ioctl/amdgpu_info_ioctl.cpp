// DRM_AMDGPU_INFO (amdgpu_kms.c amdgpu_info_ioctl): every answer is copied as
// min(return_size, size of the kernel's structure), so shorter and longer callers both work.
#include <amdgpu_drm.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "amdgpu/uapi/amdgpu_drm_ext.h"
#include "core/device.h"
#include "core/emulator.h"
#include "ioctl/handlers.h"
#include "memory/va_layout.h"
#include "util/clock.h"
#include "util/user_memory.h"

namespace rvgl::emu {

namespace {

// amdgpu_kms.c limits READ_MMR_REG to 128 registers per call.
constexpr uint32_t kMaxMmrRegs = 128;

uint32_t ring_mask(uint32_t rings) {
  return rings >= 32 ? ~0u : (1u << rings) - 1u;
}

// The active CUs of one shader array of one XCC. A harvested part (active < physical) loses its
// highest CUs from the last arrays first, one per array, so the layout stays balanced.
uint32_t array_cu_mask(const DeviceProfile &p, uint32_t se, uint32_t sa) {
  const uint32_t arrays = p.shader_engines_per_xcc * p.shader_arrays_per_engine;
  const uint32_t physical = arrays * p.cus_per_array_per_xcc;
  const uint32_t missing = physical > p.active_cus_per_xcc ? physical - p.active_cus_per_xcc : 0;
  const uint32_t index = se * p.shader_arrays_per_engine + sa;
  uint32_t cus = p.cus_per_array_per_xcc;
  // Each full round of harvesting takes one CU from every array; the remainder from the last.
  cus -= missing / arrays;
  if (index >= arrays - missing % arrays) --cus;
  return cus >= 32 ? ~0u : (1u << cus) - 1u;
}

// DEV_INFO's cu_bitmap / cu_ao_bitmap are 4x4 (SE x SA) and hold XCC 0 only (amdgpu_kms.c copies
// cu_info.bitmap[0]). GFX11 parts with more than four SEs put SE 4-7 in columns 2-3
// (gfx_v11_0.c gfx_v11_0_get_cu_info: bitmap[i % 4][j + (i / 4) * 2]). Always-on CUs: the first
// two of each array on GFX10+ (gfx_v11_0_get_cu_info counter < 2), every active one on GFX9
// (gfx_v9_4_3_get_cu_info counter < max_cu_per_sh). cu_ao_mask packs SE 0-1, SA 0-1 at
// se * 16 + sa * 8.
void fill_cu_bitmaps(const DeviceProfile &p, drm_amdgpu_info_device &b) {
  const bool gfx11_columns = p.family >= RVGL_AMDGPU_FAMILY_GC_11_0_0;
  const bool all_always_on = p.family < AMDGPU_FAMILY_NV;
  b.cu_ao_mask = 0;
  for (uint32_t se = 0; se < p.shader_engines_per_xcc; ++se)
    for (uint32_t sa = 0; sa < p.shader_arrays_per_engine; ++sa) {
      uint32_t row = se, col = sa;
      if (gfx11_columns) {
        if (se >= 8 || sa >= 2) continue;
        row = se % 4;
        col = sa + (se / 4) * 2;
      } else if (se >= 4 || sa >= 4) {
        continue;
      }
      const uint32_t mask = array_cu_mask(p, se, sa);
      uint32_t ao = mask;
      if (!all_always_on) ao = mask & 0x3u;
      b.cu_bitmap[row][col] = mask;
      b.cu_ao_bitmap[row][col] = ao;
      if (se < 2 && sa < 2) b.cu_ao_mask |= ao << (se * 16 + sa * 8);
    }
}

void fill_dev_info(const Device &d, rvgl_drm_amdgpu_info_device &out) {
  const DeviceProfile &p = d.profile();
  drm_amdgpu_info_device &b = out.base;
  const uint32_t xccs = d.xccs();
  b.device_id = p.pci_device;
  b.chip_rev = p.chip_rev;
  b.external_rev = p.external_rev;
  b.pci_rev = p.pci_revision;
  b.family = p.family;
  b.num_shader_engines = p.shader_engines_per_xcc * xccs;
  b.num_shader_arrays_per_engine = p.shader_arrays_per_engine;
  b.gpu_counter_freq = p.gpu_counter_freq_khz;
  b.max_engine_clock = p.max_engine_clock_khz;
  b.max_memory_clock = p.max_memory_clock_khz;
  b.cu_active_number = p.active_cus_per_xcc * xccs;
  fill_cu_bitmaps(p, b);
  const uint32_t rbs = p.num_rb_pipes_per_xcc * xccs;
  b.num_rb_pipes = rbs;
  b.enabled_rb_pipes_mask = rbs >= 32 ? ~0u : (1u << rbs) - 1u;
  b.num_hw_gfx_contexts = p.num_hw_gfx_contexts;
  b.ids_flags = p.ids_flags;
  b.virtual_address_offset = va::kVirtualAddressOffset;
  b.virtual_address_max = va::kVirtualAddressMax;
  b.virtual_address_alignment = va::kGpuPageSize;
  b.pte_fragment_size = (1u << 9) * va::kGpuPageSize;  // amdgpu_vm_fragment_size default 9
  b.gart_page_size = va::kGpuPageSize;
  b.vram_type = p.vram_type;
  b.vram_bit_width = p.vram_bit_width;
  b.gc_double_offchip_lds_buf = 1;
  b.wave_front_size = p.wave_front_size;
  b.num_shader_visible_vgprs = 256;
  b.num_cu_per_sh = p.cus_per_array_per_xcc;
  b.num_tcc_blocks = p.num_tcc_blocks;
  b.gs_vgt_table_depth = 32;
  b.gs_prim_buffer_depth = 1792;
  b.max_gs_waves_per_vgt = 32;
  b.high_va_offset = va::kHighVaOffset;
  b.high_va_max = va::kHighVaMax;
  out.min_engine_clock = p.min_engine_clock_khz;
  out.min_memory_clock = p.min_memory_clock_khz;
  out.tcp_cache_size = p.tcp_cache_kib;
  out.num_sqc_per_wgp = 1;
  out.sqc_data_cache_size = p.sqc_data_cache_kib;
  out.sqc_inst_cache_size = p.sqc_inst_cache_kib;
  out.gl1c_cache_size = p.gl1c_cache_kib;
  out.gl2c_cache_size = p.gl2c_cache_kib;
  out.mall_size = p.mall_bytes;
  out.shadow_size = p.userq_areas.gfx_shadow_size;
  out.shadow_alignment = p.userq_areas.gfx_shadow_alignment;
  out.csa_size = p.userq_areas.gfx_csa_size;
  out.csa_alignment = p.userq_areas.gfx_csa_alignment;
  for (uint32_t ip = 0; ip < AMDGPU_HW_IP_NUM; ++ip)
    if (const IpBlock *blk = d.ip_block(ip); blk && blk->userq_slots) out.userq_ip_mask |= 1u << ip;
}

// amdgpu_vm.h AMDGPU_VM_RESERVED_VRAM: VRAM kept back for page tables, never usable.
constexpr uint64_t kVmReservedVram = 8ull << 20;

// The sizes amdgpu_kms.c reports: totals are the heaps, usable subtracts what the kernel pinned
// (vram_pin_size, visible_pin_size, gart_pin_size) and, for VRAM, AMDGPU_VM_RESERVED_VRAM.
struct MemoryView {
  uint64_t vram_total, vram_usable, visible_total, visible_usable, gtt_total, gtt_usable;
};

MemoryView memory_view(const Device &d) {
  using Pool = MemoryAccount::Pool;
  const MemoryAccount &mem = *d.memory();
  MemoryView v{};
  v.vram_total = mem.total(Pool::Vram);
  const uint64_t held = mem.pinned(Pool::Vram) + kVmReservedVram;
  v.vram_usable = v.vram_total > held ? v.vram_total - held : 0;
  v.visible_total = std::min<uint64_t>(v.vram_total, d.profile().visible_vram_mib << 20);
  const uint64_t vis_pin = std::min(v.visible_total, mem.pinned(Pool::Vram));
  v.visible_usable = std::min(v.visible_total - vis_pin, v.vram_usable);
  v.gtt_total = mem.total(Pool::Gtt);
  v.gtt_usable = v.gtt_total - mem.pinned(Pool::Gtt);
  return v;
}

int hw_ip_info(const Device &d, const drm_amdgpu_info &info, rvgl_drm_amdgpu_info_hw_ip &ip) {
  if (info.query_hw_ip.ip_instance >= AMDGPU_HW_IP_INSTANCE_MAX_COUNT) return -EINVAL;
  if (info.query_hw_ip.type >= AMDGPU_HW_IP_NUM) return -EINVAL;
  ip = {};
  const IpBlock *b = d.ip_block(info.query_hw_ip.type);
  if (!b) return 0;  // a known IP type the device lacks: all zero
  ip.hw_ip_version_major = b->major;
  ip.hw_ip_version_minor = b->minor;
  ip.ib_start_alignment = b->ib_start_alignment;
  ip.ib_size_alignment = b->ib_size_alignment;
  ip.available_rings = ring_mask(ctx_ring_count(d, info.query_hw_ip.type));
  ip.ip_discovery_version = (b->major << 16) | (b->minor << 8) | b->revision;
  ip.userq_num_slots = b->userq_slots;
  return 0;
}

// Which firmware queries the kernel answers and with which sub-indices (amdgpu_kms.c
// amdgpu_firmware_info(): types 0x01..0x08 and 0x0a..0x1c of amdgpu_drm.h; MEC has indices 0-1,
// SDMA one per instance, TA the PSP TA types ASD..SECUREDISPLAY (1..7) of amdgpu_ucode.h).
// A block the part lacks is still answered, with version 0 (Mesa queries UVD and VCE on every
// part and gives up on an error).
constexpr uint32_t kLastFwType = 0x1c;  // AMDGPU_INFO_FW_VPE
constexpr uint32_t kFirstTaType = 1, kLastTaType = 7;

int firmware_info(const Device &d, const drm_amdgpu_info &info, drm_amdgpu_info_firmware &fw) {
  if (info.query_fw.ip_instance != 0) return -EINVAL;
  const uint32_t type = info.query_fw.fw_type, index = info.query_fw.index;
  if (type == 0 || type == 0x09 || type > kLastFwType) return -EINVAL;
  if (type == AMDGPU_INFO_FW_GFX_MEC && index > 1) return -EINVAL;
  if (type == AMDGPU_INFO_FW_SDMA && index >= d.ring_count(AMDGPU_HW_IP_DMA)) return -EINVAL;
  if (type == AMDGPU_INFO_FW_TA && (index < kFirstTaType || index > kLastTaType)) return -EINVAL;
  fw.ver = fw.feature = 0;
  for (const auto &e : d.profile().firmware)
    if (e.fw_type == type) {
      fw.ver = e.version;
      fw.feature = e.feature;
    }
  return 0;
}

int sensor(const Device &d, uint32_t type, uint32_t &v) {
  const DeviceProfile &p = d.profile();
  switch (type) {
    case AMDGPU_INFO_SENSOR_GFX_SCLK:
    case AMDGPU_INFO_SENSOR_STABLE_PSTATE_GFX_SCLK:
      v = static_cast<uint32_t>(p.max_engine_clock_khz / 1000);
      return 0;
    case AMDGPU_INFO_SENSOR_GFX_MCLK:
    case AMDGPU_INFO_SENSOR_STABLE_PSTATE_GFX_MCLK:
      v = static_cast<uint32_t>(p.max_memory_clock_khz / 1000);
      return 0;
    case AMDGPU_INFO_SENSOR_GPU_TEMP:
      v = 45000;
      return 0;  // millidegrees C
    case AMDGPU_INFO_SENSOR_GPU_LOAD:
      v = 0;
      return 0;  // percent
    case AMDGPU_INFO_SENSOR_GPU_AVG_POWER:
      v = 40;
      return 0;  // watts
    case AMDGPU_INFO_SENSOR_VDDNB:
      v = 900;
      return 0;  // millivolts
    case AMDGPU_INFO_SENSOR_VDDGFX:
      v = 1000;
      return 0;
    default:
      return -EINVAL;
  }
}

int uq_fw_areas(const Device &d, uint32_t ip, rvgl_drm_amdgpu_info_uq_metadata &m) {
  const IpBlock *b = d.ip_block(ip);
  if (!b || !b->userq_slots) return -EINVAL;
  const UserqAreas &a = d.profile().userq_areas;
  m = {};
  switch (ip) {
    case AMDGPU_HW_IP_GFX:
      m.gfx = {a.gfx_shadow_size, a.gfx_shadow_alignment, a.gfx_csa_size, a.gfx_csa_alignment};
      return 0;
    case AMDGPU_HW_IP_COMPUTE:
      m.compute = {a.compute_eop_size, a.compute_eop_alignment};
      return 0;
    case AMDGPU_HW_IP_DMA:
      m.sdma = {a.sdma_csa_size, a.sdma_csa_alignment};
      return 0;
    default:
      return -EINVAL;
  }
}

}  // namespace

int amdgpu_ioctl_info(DeviceFile &f, void *data) {
  const auto &info = *static_cast<drm_amdgpu_info *>(data);
  const uint64_t out = info.return_pointer;
  const uint32_t size = info.return_size;
  if (!size || !out) return -EINVAL;
  Device &d = f.device;
  auto put = [&](const void *v, size_t n) {
    return copy_to_user(out, v, std::min<size_t>(size, n)) ? -EFAULT : 0;
  };
  auto put32 = [&](uint32_t v) { return put(&v, sizeof(v)); };
  auto put64 = [&](uint64_t v) { return put(&v, sizeof(v)); };
  const MemoryAccount &mem = *d.memory();
  using Pool = MemoryAccount::Pool;

  switch (info.query) {
    case AMDGPU_INFO_ACCEL_WORKING:
      return put32(1);
    case AMDGPU_INFO_HW_IP_INFO: {
      rvgl_drm_amdgpu_info_hw_ip ip;
      if (int r = hw_ip_info(d, info, ip)) return r;
      return put(&ip, sizeof(ip));
    }
    case AMDGPU_INFO_HW_IP_COUNT:
      if (info.query_hw_ip.type >= AMDGPU_HW_IP_NUM) return -EINVAL;
      return put32(d.ip_block(info.query_hw_ip.type) ? 1 : 0);
    case AMDGPU_INFO_TIMESTAMP:
      return put64(gpu_clock_ticks());
    case AMDGPU_INFO_FW_VERSION: {
      drm_amdgpu_info_firmware fw{};
      if (int r = firmware_info(d, info, fw)) return r;
      return put(&fw, sizeof(fw));
    }
    case AMDGPU_INFO_NUM_BYTES_MOVED:
    case AMDGPU_INFO_NUM_EVICTIONS:
    case AMDGPU_INFO_NUM_VRAM_CPU_PAGE_FAULTS:
    case AMDGPU_INFO_RAS_ENABLED_FEATURES:
      return put64(0);
    case AMDGPU_INFO_VRAM_USAGE:
    case AMDGPU_INFO_VIS_VRAM_USAGE:
      return put64(mem.used(Pool::Vram));
    case AMDGPU_INFO_GTT_USAGE:
      return put64(mem.used(Pool::Gtt));
    case AMDGPU_INFO_GDS_CONFIG: {
      drm_amdgpu_info_gds gds{};  // no GDS on these parts
      return put(&gds, sizeof(gds));
    }
    case AMDGPU_INFO_VRAM_GTT: {
      const MemoryView m = memory_view(d);
      drm_amdgpu_info_vram_gtt vg{};
      vg.vram_size = m.vram_usable;
      vg.vram_cpu_accessible_size = m.visible_usable;
      vg.gtt_size = m.gtt_usable;
      return put(&vg, sizeof(vg));
    }
    case AMDGPU_INFO_MEMORY: {
      const MemoryView v = memory_view(d);
      drm_amdgpu_memory_info m{};
      m.vram = {v.vram_total, v.vram_usable, mem.used(Pool::Vram), v.vram_usable * 3 / 4};
      m.cpu_accessible_vram = {v.visible_total, v.visible_usable,
                               std::min(v.visible_total, mem.used(Pool::Vram)),
                               v.visible_usable * 3 / 4};
      m.gtt = {v.gtt_total, v.gtt_usable, mem.used(Pool::Gtt), v.gtt_usable * 3 / 4};
      return put(&m, sizeof(m));
    }
    case AMDGPU_INFO_READ_MMR_REG: {
      const uint32_t count = info.read_mmr_reg.count;
      if (count > kMaxMmrRegs) return -EINVAL;
      std::vector<uint32_t> regs(count);
      for (uint32_t i = 0; i < count; ++i) {
        const uint32_t off = info.read_mmr_reg.dword_offset + i;
        bool found = false;
        for (const auto &r : d.profile().registers)
          if (r.offset == off) {
            regs[i] = r.value;
            found = true;
          }
        if (!found) return -EFAULT;  // not on the allow list (amdgpu_kms.c answers EFAULT)
      }
      return put(regs.data(), regs.size() * sizeof(uint32_t));
    }
    case AMDGPU_INFO_DEV_INFO: {
      rvgl_drm_amdgpu_info_device di{};
      fill_dev_info(d, di);
      return put(&di, sizeof(di));
    }
    case AMDGPU_INFO_VBIOS:
      if (info.vbios_info.type == AMDGPU_INFO_VBIOS_SIZE) return put32(0);
      return -EINVAL;
    case AMDGPU_INFO_SENSOR: {
      uint32_t v;
      if (int r = sensor(d, info.sensor_info.type, v)) return r;
      return put32(v);
    }
    case AMDGPU_INFO_VIDEO_CAPS: {
      // amdgpu_kms.c: DECODE or ENCODE, anything else EINVAL; the caps of each codec the part
      // has (none is emulated: all zero, as for a part without VCN).
      if (info.video_cap.type != AMDGPU_INFO_VIDEO_CAPS_DECODE &&
          info.video_cap.type != AMDGPU_INFO_VIDEO_CAPS_ENCODE)
        return -EINVAL;
      drm_amdgpu_info_video_caps caps{};
      return put(&caps, sizeof(caps));
    }
    case AMDGPU_INFO_VRAM_LOST_COUNTER:
      return put32(d.resets().vram_lost.load());
    case RVGL_AMDGPU_INFO_MAX_IBS: {
      uint32_t max_ibs[AMDGPU_HW_IP_NUM] = {};
      for (uint32_t ip = 0; ip < AMDGPU_HW_IP_NUM; ++ip)
        if (const IpBlock *b = d.ip_block(ip)) max_ibs[ip] = b->max_ibs;
      return put(max_ibs, sizeof(max_ibs));
    }
    case RVGL_AMDGPU_INFO_GPUVM_FAULT: {
      const VmFault vf = f.vm->last_fault();
      rvgl_drm_amdgpu_info_gpuvm_fault g{vf.addr, vf.status, vf.vmhub};
      return put(&g, sizeof(g));
    }
    case RVGL_AMDGPU_INFO_UQ_FW_AREAS: {
      rvgl_drm_amdgpu_info_uq_metadata m;
      if (int r = uq_fw_areas(d, info.query_hw_ip.type, m)) return r;
      return put(&m, sizeof(m));
    }
    default:
      return -EINVAL;
  }
}

}  // namespace rvgl::emu
