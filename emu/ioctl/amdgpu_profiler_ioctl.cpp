// DRM_AMDGPU_PROFILER (seed 000): GET_VER and the SPM operations of the node's SPM unit.
#include <cerrno>
#include <cstring>
#include <string>

#include "amdgpu/uapi/amdgpu_drm_ext.h"
#include "core/device.h"
#include "core/emulator.h"
#include "ioctl/handlers.h"

namespace rvgl::emu {

int amdgpu_ioctl_profiler(DeviceFile &f, void *data) {
  auto &args = *static_cast<rvgl_drm_amdgpu_profiler_args *>(data);
  if (args.pad) return -EINVAL;
  switch (args.op) {
    case RVGL_AMDGPU_PROFILER_OP_GET_VER: {
      // "Input: @data must be zero (reserved for forward compatibility)."
      static const uint8_t zero[sizeof(args.data)] = {};
      if (std::memcmp(&args.data, zero, sizeof(zero)) != 0) return -EINVAL;
      args.data.version = kSpmVersion;
      return 0;
    }
    case RVGL_AMDGPU_PROFILER_OP_SPM: {
      auto &spm = args.data.spm;
      for (uint32_t r : spm.reserved)
        if (r) return -EINVAL;
      SpmUnit &unit = f.device.spm();
      switch (spm.op) {
        case RVGL_AMDGPU_SPM_OP_ACQUIRE: {
          std::string dir;
          {
            std::lock_guard lk(Emulator::get().mutex());
            dir = Emulator::get().config().state_dir;
          }
          return unit.acquire(f.id, dir);
        }
        case RVGL_AMDGPU_SPM_OP_RELEASE:
          return unit.release(f.id);
        case RVGL_AMDGPU_SPM_OP_SET_DEST_BUF:
          return unit.set_dest(f.id, spm);
        default:
          return -EINVAL;
      }
    }
    default:
      return -EINVAL;
  }
}

}  // namespace rvgl::emu
