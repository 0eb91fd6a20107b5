// Fills the capset (protocol limits, device facts, feature bits) from the real device, so a
// guest never learns of a capability the host cannot deliver.
#pragma once

#include <cstdint>

#include "amdgpu/amdgpu_device.h"
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

// features_supported: the RVGL_FEATURE_* bits this host build implements; the result is their
// intersection with what the device offers.
int probe_device(AmdgpuDevice &dev, const Config &cfg, uint64_t features_supported,
                 DeviceFacts *out);

}  // namespace rvgl
