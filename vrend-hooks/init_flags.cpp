#include "init_flags.h"

#include "virgl_api.h"

namespace rvgl::hooks {

int real_init_flags(int vmm_flags, bool compute_only) {
  if (!compute_only) return vmm_flags;
  constexpr int kGlFlags = VIRGL_RENDERER_USE_EGL | VIRGL_RENDERER_USE_GLX |
                           VIRGL_RENDERER_USE_SURFACELESS | VIRGL_RENDERER_USE_GLES;
  return (vmm_flags & ~kGlFlags) | VIRGL_RENDERER_NO_VIRGL;
}

}  // namespace rvgl::hooks
