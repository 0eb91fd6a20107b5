// What the host makes of amdgpu's module parameters (src/amdgpu/kernel_params.h).
#include <catch2/catch.hpp>

#include "amdgpu/kernel_params.h"

using rvgl::parse_vm_fault_mode;
using rvgl::VmFaultMode;

TEST_CASE("vm_fault_stop's text gives what a fault does", "[kernel_params]") {
  CHECK(parse_vm_fault_mode("0\n") == VmFaultMode::kContinue);
  CHECK(parse_vm_fault_mode("1\n") == VmFaultMode::kContinue);  // GFX9+ hubs act on 2 alone
  CHECK(parse_vm_fault_mode("2\n") == VmFaultMode::kStop);
  CHECK(parse_vm_fault_mode("2") == VmFaultMode::kStop);
  CHECK(parse_vm_fault_mode("") == VmFaultMode::kUnknown);  // read while empty, or nothing read
  CHECK(parse_vm_fault_mode("3\n") == VmFaultMode::kUnknown);
  CHECK(parse_vm_fault_mode("-1\n") == VmFaultMode::kUnknown);
  CHECK(parse_vm_fault_mode("22\n") == VmFaultMode::kUnknown);
  CHECK(parse_vm_fault_mode("2\n2\n") == VmFaultMode::kUnknown);
}
