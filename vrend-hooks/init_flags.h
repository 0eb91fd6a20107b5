// The flags we pass to the real virgl_renderer_init (DESIGN.md D1), and the capset ids that
// decide them.
#pragma once

#include <cstdint>

namespace rvgl::hooks {

// virtio-gpu capset ids (linux include/uapi/linux/virtio_gpu.h, VIRTIO_GPU_CAPSET_*).
constexpr uint32_t kCapsetVirgl = 1;
constexpr uint32_t kCapsetVirgl2 = 2;
constexpr uint32_t kCapsetVenus = 4;
constexpr uint32_t kCapsetDrm = 6;

// Ids we refuse to serve ROCM contexts under: legacy virgl contexts (virgl_renderer_context_create,
// the guest kernel's own fbcon context, Mesa's virgl) are VIRGL2 contexts of the real library,
// and VIRGL / VIRGL2 capsets are what every virgl guest reads (issue 15, point 2).
constexpr bool reserved_capset(uint32_t id) {
  return id == kCapsetVirgl || id == kCapsetVirgl2;
}

// compute_only (RVGL_COMPUTE_ONLY=1): drop every GL winsys flag and set NO_VIRGL, so the real
// library starts no EGL/GLX (which needs a render node this host may not have) while venus and
// our contexts keep working.
// our_capset: when we serve the id of a renderer of the real library, that renderer is
// unreachable, so its flags go: VENUS | RENDER_SERVER for venus's id 4 (a virglrenderer built
// without venus or its render server would otherwise fail the whole init, and QEMU with
// `venus=on` passes both), DRM for the native-context id 6 (its probe of the render node would
// otherwise fail init where no native-context driver matches).
// Everything else passes unchanged, NO_VIRGL included.
int real_init_flags(int vmm_flags, bool compute_only, uint32_t our_capset);

}  // namespace rvgl::hooks
