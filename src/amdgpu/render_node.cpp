#include "amdgpu/render_node.h"

#include <xf86drm.h>

namespace rvgl {

namespace {
constexpr uint16_t kAmdPciVendor = 0x1002;
}

std::vector<std::string> list_amdgpu_render_nodes() {
  std::vector<std::string> nodes;
  drmDevicePtr devices[64];
  int n = drmGetDevices2(0, devices, 64);
  if (n <= 0) return nodes;
  for (int i = 0; i < n; ++i) {
    const drmDevicePtr d = devices[i];
    if (d->bustype == DRM_BUS_PCI && d->deviceinfo.pci &&
        d->deviceinfo.pci->vendor_id == kAmdPciVendor &&
        (d->available_nodes & (1 << DRM_NODE_RENDER)))
      nodes.emplace_back(d->nodes[DRM_NODE_RENDER]);
  }
  drmFreeDevices(devices, n);
  return nodes;
}

std::string choose_render_node(const std::string &configured) {
  if (!configured.empty()) return configured;
  auto nodes = list_amdgpu_render_nodes();
  return nodes.empty() ? std::string() : nodes.front();
}

}  // namespace rvgl
