// What the host's amdgpu module was loaded with, where the host must know it to read what the
// kernel reports. Module parameters are fixed at load (0444 in amdgpu_drv.c), module-wide.
#pragma once

#include <string_view>

namespace rvgl {

// What the host kernel does with a faulting GPU access (amdgpu.vm_fault_stop).
enum class VmFaultMode {
  kUnknown,   // the parameter could not be read (no sysfs, no amdgpu module)
  kContinue,  // 0, the default, and 1 on GFX9+: the access goes to the dummy page, the job goes on
  kStop,      // 2: the faulting job stops and fails at its timeout
};

// The mode a parameter file's text gives ("2\n"). 1 ("print first") is kContinue: the hubs of
// GFX9 and later turn the dummy-page redirect off for 2 alone (gmc_v9_0_hw_init,
// gfx_v11_0_gfxhub_enable); only pre-GFX9 parts (gmc_v6-v8) stop after a first fault.
VmFaultMode parse_vm_fault_mode(std::string_view text);

// Reads /sys/module/amdgpu/parameters/vm_fault_stop (a few system calls: call it only when a
// fault needs it).
VmFaultMode read_vm_fault_mode();

}  // namespace rvgl
