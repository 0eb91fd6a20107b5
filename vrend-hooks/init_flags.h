// The flags we pass to the real virgl_renderer_init (DESIGN.md D1).
#pragma once

namespace rvgl::hooks {

// compute_only (RVGL_COMPUTE_ONLY=1): drop every GL winsys flag and set NO_VIRGL, so the real
// library starts no EGL/GLX (which needs a render node this host may not have) while venus and
// our contexts keep working. Otherwise the VMM's flags pass unchanged, NO_VIRGL included.
int real_init_flags(int vmm_flags, bool compute_only);

}  // namespace rvgl::hooks
