// The capset a context offers its guest: protocol limits from Config, feature bits this build
// implements, intersected with the device facts src/amdgpu reports — so a guest never learns of
// a capability the host cannot deliver.
#pragma once

#include <cstdint>

#include "amdgpu/device_probe.h"
#include "context/config.h"
#include "rocm_virgl_protocol.h"

namespace rvgl {

// Device-derived facts a context needs besides the capset itself.
struct DeviceFacts {
  rvgl_capset capset{};
  uint32_t userq_ip_mask = 0;  // 1 << AMDGPU_HW_IP_*
  uint32_t profiler_version = 0;
  bool has_profiler = false;
};

// The capset for what the device reported; features_supported: the RVGL_FEATURE_* bits this
// host build implements.
DeviceFacts assemble_capset(const AmdgpuFacts &dev, const Config &cfg, uint64_t features_supported);

// read_device_facts + assemble_capset.
int probe_device(AmdgpuDevice &dev, const Config &cfg, uint64_t features_supported,
                 DeviceFacts *out);

}  // namespace rvgl
