// What an amdgpu render node reports about itself: the kernel's INFO answers, libdrm_amdgpu's
// marketing name, and the compute partitioning sysfs describes. Device facts only: what the
// protocol makes of them (the capset) is src/context/capset_assembly.h.
#pragma once

#include <cstdint>
#include <string>

#include "amdgpu/amdgpu_device.h"

namespace rvgl {

struct AmdgpuFacts {
  rvgl_drm_amdgpu_info_device info{};  // DEV_INFO
  drm_amdgpu_memory_info memory{};     // MEMORY
  rvgl_drm_amdgpu_info_hw_ip compute{}, dma{};
  bool has_compute = false, has_dma = false;  // the IP answered and has rings
  // IBs one CS may carry on a compute / SDMA ring: the kernel refuses more with -EINVAL.
  uint32_t max_ibs_compute = 0, max_ibs_dma = 0;
  rvgl_drm_amdgpu_info_uq_metadata compute_userq{};
  bool has_compute_userq = false;  // compute user queues offered and their areas known
  rvgl_drm_amdgpu_info_uq_metadata sdma_userq{};
  bool has_sdma_userq = false;  // SDMA user queues offered and their context save area known
  // The name libdrm_amdgpu's amdgpu.ids (the host's) gives the PCI id and revision, as
  // amdgpu_get_marketing_name would; empty when the table does not know them.
  std::string marketing_name;
  // XCCs behind this node: compute_partition_config/xcc/num_inst of the PCI device (amdgpu_xcp.c,
  // one partition's instances); 1 for a part without compute partitions.
  uint32_t xcc_per_xcp = 1;
  bool has_profiler = false;
  uint32_t profiler_version = 0;
};

// 0 or -errno (DEV_INFO and MEMORY must answer; the rest is optional).
int read_device_facts(AmdgpuDevice &dev, AmdgpuFacts *out);

}  // namespace rvgl
