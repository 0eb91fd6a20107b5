#include "amdgpu/kernel_params.h"

#include <fcntl.h>
#include <unistd.h>

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
  // open/read rather than stdio: no allocation, so a look on the engine's thread that runs out of
  // memory elsewhere still reads it.
  const int fd = ::open("/sys/module/amdgpu/parameters/vm_fault_stop", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return VmFaultMode::kUnknown;
  char buf[16];
  const ssize_t n = ::read(fd, buf, sizeof(buf));
  ::close(fd);
  if (n <= 0) return VmFaultMode::kUnknown;
  return parse_vm_fault_mode({buf, static_cast<size_t>(n)});
}

}  // namespace rvgl
