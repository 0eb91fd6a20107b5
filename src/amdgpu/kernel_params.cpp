#include "amdgpu/kernel_params.h"

#include <cstdio>

namespace rvgl {

VmFaultMode parse_vm_fault_mode(std::string_view text) {
  // An int parameter prints as "%d\n" (param_get_int).
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.remove_suffix(1);
  if (text == "0" || text == "1") return VmFaultMode::kContinue;
  if (text == "2") return VmFaultMode::kStop;
  return VmFaultMode::kUnknown;
}

VmFaultMode read_vm_fault_mode() {
  FILE *f = std::fopen("/sys/module/amdgpu/parameters/vm_fault_stop", "re");
  if (!f) return VmFaultMode::kUnknown;
  char buf[16];
  const size_t n = std::fread(buf, 1, sizeof(buf), f);
  std::fclose(f);
  return parse_vm_fault_mode({buf, n});
}

}  // namespace rvgl
