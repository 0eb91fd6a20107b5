#include "context/capset_assembly.h"

#include <algorithm>
#include <cstring>

namespace rvgl {

namespace {

constexpr uint32_t kAmdPciVendor = 0x1002;
// What libdrm's users show for a part amdgpu.ids does not name (Mesa ac_gpu_info.c's default).
constexpr const char *kFallbackName = "AMD Radeon Graphics";

void copy_name(char (&dst)[RVGL_MARKETING_NAME_SIZE], const std::string &src) {
  std::strncpy(dst, src.c_str(), RVGL_MARKETING_NAME_SIZE - 1);
  dst[RVGL_MARKETING_NAME_SIZE - 1] = '\0';
}

}  // namespace

DeviceFacts assemble_capset(const AmdgpuFacts &d, const Config &cfg, uint64_t features_supported) {
  DeviceFacts f;
  rvgl_capset &c = f.capset;
  const auto &b = d.info.base;
  c.wire_format_version = RVGL_WIRE_FORMAT_VERSION;
  c.protocol_major = RVGL_PROTOCOL_MAJOR;
  c.protocol_minor = RVGL_PROTOCOL_MINOR;
  c.shmem_size = RVGL_SHMEM_SIZE;
  c.max_submit_bytes = cfg.limits.max_submit_bytes;
  // One bound for every queue the guest may create: what the host allows, and no more than the
  // kernel takes on any of their rings.
  c.max_ibs_per_submit = cfg.limits.max_ibs_per_submit;
  if (d.has_compute) c.max_ibs_per_submit = std::min(c.max_ibs_per_submit, d.max_ibs_compute);
  if (d.has_dma) c.max_ibs_per_submit = std::min(c.max_ibs_per_submit, d.max_ibs_dma);
  c.max_waits_per_submit = cfg.limits.max_waits_per_submit;

  c.pci_vendor_id = kAmdPciVendor;
  c.pci_device_id = b.device_id;
  c.pci_revision_id = b.pci_rev;
  c.family = b.family;
  c.chip_external_rev = b.external_rev;
  c.gfx_ip_major = d.compute.hw_ip_version_major;
  c.gfx_ip_minor = d.compute.hw_ip_version_minor;
  c.gfx_ip_stepping = d.compute.ip_discovery_version & 0xff;
  c.num_cu = b.cu_active_number;
  c.num_shader_engines = b.num_shader_engines;
  c.wave_size = b.wave_front_size;
  c.gpu_counter_freq_khz = b.gpu_counter_freq;
  c.max_engine_clock_khz =
      static_cast<uint32_t>(std::min<uint64_t>(b.max_engine_clock, UINT32_MAX));
  c.vram_size = d.memory.vram.total_heap_size;
  c.visible_vram_size = d.memory.cpu_accessible_vram.total_heap_size;
  c.gtt_size = d.memory.gtt.total_heap_size;
  // The guest owns the whole low VA range: the host maps nothing of its own in a context's VM.
  c.va_start = b.virtual_address_offset;
  c.va_end = b.virtual_address_max;
  c.va_alignment = std::max<uint32_t>(b.virtual_address_alignment, 4096);
  c.num_compute_rings = __builtin_popcount(d.compute.available_rings);
  c.num_sdma_rings = __builtin_popcount(d.dma.available_rings);

  copy_name(c.marketing_name, d.marketing_name.empty() ? kFallbackName : d.marketing_name);
  c.num_xcp = 1;  // a context's render node is one partition
  c.num_xcc = cfg.num_xcc_override ? cfg.num_xcc_override : d.xcc_per_xcp;

  if (d.has_compute) c.kernel_queue_ip_mask |= 1u << RVGL_IP_COMPUTE;
  if (d.has_dma) c.kernel_queue_ip_mask |= 1u << RVGL_IP_SDMA;
  f.userq_ip_mask = d.info.userq_ip_mask;
  // QUEUE_CREATE(USER) needs the wptr object, at most RVGL_USERQ_WPTR_OBJECT_MAX bytes, mapped
  // whole; a kernel whose pages are larger (virtual_address_alignment is its PAGE_SIZE: 64 KiB on
  // some arm64 and ppc64 builds) maps nothing that small, so no user queue could be made there.
  const bool userq_mappable = c.va_alignment <= RVGL_USERQ_WPTR_OBJECT_MAX;
  if (!userq_mappable) f.userq_ip_mask = 0;
  if (d.has_compute_userq && userq_mappable) {
    c.user_queue_ip_mask |= 1u << RVGL_IP_COMPUTE;
    c.userq_eop_size = d.compute_userq.compute.eop_size;
    c.userq_eop_alignment = d.compute_userq.compute.eop_alignment;
  }
  if (d.has_sdma_userq && userq_mappable) {
    c.user_queue_ip_mask |= 1u << RVGL_IP_SDMA;
    c.userq_sdma_csa_size = d.sdma_userq.sdma.csa_size;
    c.userq_sdma_csa_alignment = d.sdma_userq.sdma.csa_alignment;
  }

  f.has_profiler = d.has_profiler;
  f.profiler_version = d.profiler_version;
  if (d.has_profiler) c.spm_version = d.profiler_version;

  uint64_t features = RVGL_FEATURE_USERPTR | RVGL_FEATURE_USERPTR_RDONLY | RVGL_FEATURE_EVENT_RING |
                      RVGL_FEATURE_RESOURCE_IMPORT;
  if (c.kernel_queue_ip_mask) features |= RVGL_FEATURE_KERNEL_QUEUES;
  if (c.user_queue_ip_mask) features |= RVGL_FEATURE_USER_QUEUES;
  if (f.has_profiler) features |= RVGL_FEATURE_SPM;
  c.features = features & features_supported;
  return f;
}

int probe_device(AmdgpuDevice &dev, const Config &cfg, uint64_t features_supported,
                 DeviceFacts *out) {
  AmdgpuFacts facts;
  if (int err = read_device_facts(dev, &facts)) return err;
  *out = assemble_capset(facts, cfg, features_supported);
  return 0;
}

}  // namespace rvgl
