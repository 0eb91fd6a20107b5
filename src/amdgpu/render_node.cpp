#include "amdgpu/render_node.h"

#include <xf86drm.h>

#include <span>

namespace rvgl {

namespace {

constexpr uint16_t kAmdPciVendor = 0x1002;

// drmGetDevices2()'s array, freed however the walk over it ends: a node name's copy may throw.
class DrmDevices {
 public:
  DrmDevices() : n_(drmGetDevices2(0, devices_, kMax)) {}
  ~DrmDevices() {
    if (n_ > 0) drmFreeDevices(devices_, n_);
  }
  DrmDevices(const DrmDevices &) = delete;
  DrmDevices &operator=(const DrmDevices &) = delete;
  std::span<const drmDevicePtr> all() const {
    return {devices_, n_ > 0 ? static_cast<size_t>(n_) : 0};
  }

 private:
  static constexpr int kMax = 64;
  drmDevicePtr devices_[kMax];
  int n_;
};

}  // namespace

std::vector<std::string> list_amdgpu_render_nodes() {
  std::vector<std::string> nodes;
  const DrmDevices devices;
  for (const drmDevicePtr d : devices.all()) {
    if (d->bustype == DRM_BUS_PCI && d->deviceinfo.pci &&
        d->deviceinfo.pci->vendor_id == kAmdPciVendor &&
        (d->available_nodes & (1 << DRM_NODE_RENDER)))
      nodes.emplace_back(d->nodes[DRM_NODE_RENDER]);
  }
  return nodes;
}

std::string choose_render_node(const std::string &configured) {
  if (!configured.empty()) return configured;
  auto nodes = list_amdgpu_render_nodes();
  return nodes.empty() ? std::string() : nodes.front();
}

}  // namespace rvgl
