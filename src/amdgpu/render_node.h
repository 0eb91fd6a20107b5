// Finding the amdgpu render node a context should use (DESIGN.md D2): the VMM's get_drm_fd
// callback first (handled by the caller), else the configured path, else the first amdgpu node.
#pragma once

#include <string>
#include <vector>

namespace rvgl {

// Render nodes of AMD PCI devices, in drmGetDevices2 order.
std::vector<std::string> list_amdgpu_render_nodes();

// configured if not empty, else the first amdgpu render node, else "" (no device).
std::string choose_render_node(const std::string &configured);

}  // namespace rvgl
