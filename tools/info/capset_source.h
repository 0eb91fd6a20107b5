// Where rvgl-info reads a capset from. Both return the host's bytes checked and decoded by the
// guest library's parser (rvgl_capset.h), so the tool refuses exactly what a guest would.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "capset_report.h"
#include "rvgl_result.h"

namespace rvgl::info {

struct LoadedCapset {
  rvgl_capset capset{};
  CapsetOrigin origin;
  std::vector<uint8_t> bytes;  // what the host answered, unparsed
};

// Through a vtest server (virgl_test_server with our hooks in front of libvirglrenderer).
guest::Result<LoadedCapset> load_capset_vtest(const std::string &socket_path, uint32_t capset_id,
                                              std::chrono::milliseconds timeout);

// In this process, through the virglrenderer C API as librocm_virgl.so exports it: init with
// VIRGL_RENDERER_NO_VIRGL (no EGL needed), get_cap_set + fill_caps, cleanup. The device is
// whatever the hooks' configuration picks (RVGL_RENDER_NODE, else the first amdgpu node, which
// is the emulator's when librvgl_emu.so is preloaded or linked in).
guest::Result<LoadedCapset> load_capset_in_process(uint32_t capset_id);

}  // namespace rvgl::info
