#include "init_flags.h"

#include "virgl_api.h"

namespace rvgl::hooks {

int real_init_flags(int vmm_flags, bool compute_only, uint32_t our_capset) {
  int flags = vmm_flags;
  if (our_capset == kCapsetVenus) flags &= ~(VIRGL_RENDERER_VENUS | VIRGL_RENDERER_RENDER_SERVER);
  if (our_capset == kCapsetDrm) flags &= ~VIRGL_RENDERER_DRM;
  if (!compute_only) return flags;
  constexpr int kGlFlags = VIRGL_RENDERER_USE_EGL | VIRGL_RENDERER_USE_GLX |
                           VIRGL_RENDERER_USE_SURFACELESS | VIRGL_RENDERER_USE_GLES;
  return (flags & ~kGlFlags) | VIRGL_RENDERER_NO_VIRGL;
}

}  // namespace rvgl::hooks
