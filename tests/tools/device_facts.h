// What the emulated device reports about itself through stock libdrm_amdgpu (not through the
// project's own probing code), for holding rvgl-info's output against: the marketing name from
// libdrm_amdgpu (amdgpu_get_marketing_name; Debian 12's amdgpu.ids predates these devices, so
// the fallback name), the XCC count from the partition's sysfs (amdgpu_xcp.c).
#pragma once

#include <cstdint>
#include <string>

namespace rvgl::tools_test {

struct DeviceFacts {
  uint32_t device_id = 0, pci_rev = 0, family = 0, external_rev = 0;
  uint32_t cu_active_number = 0, num_shader_engines = 0, wave_front_size = 0;
  uint64_t gpu_counter_freq = 0, max_engine_clock = 0;
  uint64_t virtual_address_offset = 0, virtual_address_max = 0;
  uint64_t vram = 0, visible_vram = 0, gtt = 0;
  uint32_t compute_ip_major = 0, compute_ip_minor = 0;
  uint32_t compute_rings = 0, sdma_rings = 0;  // available rings, counted
  std::string marketing_name;                  // libdrm_amdgpu's, or the fallback name
  uint32_t xcc_per_xcp = 1;
};

// Throws std::runtime_error when the node cannot be opened or queried.
DeviceFacts query_device_facts(const std::string &render_node = "/dev/dri/renderD128");

}  // namespace rvgl::tools_test
