#include "amdgpu/device_probe.h"

#include <algorithm>
#include <cstring>

#include "amdgpu/asic_table.h"

namespace rvgl {

namespace {

constexpr uint32_t kAmdPciVendor = 0x1002;

void copy_name(char (&dst)[RVGL_MARKETING_NAME_SIZE], const char *src) {
  if (!src) return;
  std::strncpy(dst, src, RVGL_MARKETING_NAME_SIZE - 1);
  dst[RVGL_MARKETING_NAME_SIZE - 1] = '\0';
}

}  // namespace

int probe_device(AmdgpuDevice &dev, const Config &cfg, uint64_t features_supported,
                 DeviceFacts *out) {
  rvgl_drm_amdgpu_info_device info;
  if (int err = dev.query_dev_info(&info)) return err;
  drm_amdgpu_memory_info mem{};
  if (int err = dev.query_info(AMDGPU_INFO_MEMORY, &mem, sizeof(mem))) return err;
  rvgl_drm_amdgpu_info_hw_ip compute{}, dma{};
  const bool has_compute =
      dev.query_hw_ip_info(AMDGPU_HW_IP_COMPUTE, &compute) == 0 && compute.available_rings != 0;
  const bool has_dma =
      dev.query_hw_ip_info(AMDGPU_HW_IP_DMA, &dma) == 0 && dma.available_rings != 0;

  DeviceFacts f;
  rvgl_capset &c = f.capset;
  const auto &b = info.base;
  c.wire_format_version = RVGL_WIRE_FORMAT_VERSION;
  c.protocol_major = RVGL_PROTOCOL_MAJOR;
  c.protocol_minor = RVGL_PROTOCOL_MINOR;
  c.shmem_size = RVGL_SHMEM_SIZE;
  c.max_submit_bytes = cfg.limits.max_submit_bytes;
  c.max_ibs_per_submit = cfg.limits.max_ibs_per_submit;
  c.max_waits_per_submit = cfg.limits.max_waits_per_submit;

  c.pci_vendor_id = kAmdPciVendor;
  c.pci_device_id = b.device_id;
  c.pci_revision_id = b.pci_rev;
  c.family = b.family;
  c.chip_external_rev = b.external_rev;
  c.gfx_ip_major = compute.hw_ip_version_major;
  c.gfx_ip_minor = compute.hw_ip_version_minor;
  c.gfx_ip_stepping = compute.ip_discovery_version & 0xff;
  c.num_cu = b.cu_active_number;
  c.num_shader_engines = b.num_shader_engines;
  c.wave_size = b.wave_front_size;
  c.gpu_counter_freq_khz = b.gpu_counter_freq;
  c.max_engine_clock_khz =
      static_cast<uint32_t>(std::min<uint64_t>(b.max_engine_clock, UINT32_MAX));
  c.vram_size = mem.vram.total_heap_size;
  c.visible_vram_size = mem.cpu_accessible_vram.total_heap_size;
  c.gtt_size = mem.gtt.total_heap_size;
  // The guest owns the whole low VA range: the host maps nothing of its own in a context's VM.
  c.va_start = b.virtual_address_offset;
  c.va_end = b.virtual_address_max;
  c.va_alignment = std::max<uint32_t>(b.virtual_address_alignment, 4096);
  c.num_compute_rings = __builtin_popcount(compute.available_rings);
  c.num_sdma_rings = __builtin_popcount(dma.available_rings);

  const AsicFacts *asic = find_asic(static_cast<uint16_t>(b.device_id));
  copy_name(c.marketing_name, asic ? asic->marketing_name : "AMD Radeon Graphics");
  c.num_xcp = 1;  // a context's render node is one partition
  c.num_xcc = cfg.num_xcc_override ? cfg.num_xcc_override : (asic ? asic->xcc_per_xcp : 1);

  if (has_compute) c.kernel_queue_ip_mask |= 1u << RVGL_IP_COMPUTE;
  if (has_dma) c.kernel_queue_ip_mask |= 1u << RVGL_IP_SDMA;
  f.userq_ip_mask = info.userq_ip_mask;
  if (info.userq_ip_mask & (1u << AMDGPU_HW_IP_COMPUTE)) {
    rvgl_drm_amdgpu_info_uq_metadata md{};
    if (dev.query_uq_metadata(AMDGPU_HW_IP_COMPUTE, &md) == 0) {
      c.user_queue_ip_mask |= 1u << RVGL_IP_COMPUTE;
      c.userq_eop_size = md.compute.eop_size;
      c.userq_eop_alignment = md.compute.eop_alignment;
    }
  }
  // An SDMA user queue needs a context save area (mes_userq_mqd_create() validates csa_va over
  // the size AMDGPU_INFO_UQ_FW_AREAS reports): without that size no guest could size it.
  if (info.userq_ip_mask & (1u << AMDGPU_HW_IP_DMA)) {
    rvgl_drm_amdgpu_info_uq_metadata md{};
    if (dev.query_uq_metadata(AMDGPU_HW_IP_DMA, &md) == 0 && md.sdma.csa_size) {
      c.user_queue_ip_mask |= 1u << RVGL_IP_SDMA;
      c.userq_sdma_csa_size = md.sdma.csa_size;
      c.userq_sdma_csa_alignment = md.sdma.csa_alignment;
    }
  }

  rvgl_drm_amdgpu_profiler_args prof{};
  prof.op = RVGL_AMDGPU_PROFILER_OP_GET_VER;
  if (dev.profiler(&prof) == 0) {
    f.has_profiler = true;
    f.profiler_version = prof.data.version;
    c.spm_version = prof.data.version;
  }

  uint64_t features = RVGL_FEATURE_USERPTR | RVGL_FEATURE_USERPTR_RDONLY | RVGL_FEATURE_EVENT_RING |
                      RVGL_FEATURE_RESOURCE_IMPORT;
  if (c.kernel_queue_ip_mask) features |= RVGL_FEATURE_KERNEL_QUEUES;
  if (c.user_queue_ip_mask) features |= RVGL_FEATURE_USER_QUEUES;
  if (f.has_profiler) features |= RVGL_FEATURE_SPM;
  c.features = features & features_supported;
  *out = f;
  return 0;
}

}  // namespace rvgl
