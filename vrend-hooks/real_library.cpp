#include "real_library.h"

#include <dlfcn.h>

namespace rvgl::hooks {

void *resolve_real(const char *name) {
  // dlsym(RTLD_NEXT) searches the objects loaded after the caller's object, which is exactly
  // "the library we stand in front of" both when preloaded and when linked ahead of it.
  return dlsym(RTLD_NEXT, name);
}

bool real_has_v1_abi() {
  static RealSymbol<void (*)()> probe("virgl_renderer_resource_get_info_ext");
  return probe.get() != nullptr;
}

}  // namespace rvgl::hooks
