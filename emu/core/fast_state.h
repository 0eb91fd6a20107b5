// The few facts every intercepted libc call needs before it may touch the emulator: does the
// emulator exist, might this fd be one of its fds, might this path be one it owns.
//
// Why raw globals, __atomic builtins and internal linkage: the interposers run for every open/
// mmap/close of the process, including those a sanitizer runtime makes while it initialises
// itself (gcc's shared libtsan calls mmap, fstat and readlink from its symboliser before it can
// take instrumented calls). So the interposer entry points are compiled without sanitizer
// instrumentation and must answer "not ours" without calling a single instrumented function.
// Functions here are `static` so each translation unit gets its own copy: an uninstrumented copy
// can never be picked by the linker for instrumented code (as an inline COMDAT copy could), and
// vice versa. The data has no constructor, so it is valid before any constructor has run.
#pragma once

#include <stdint.h>

namespace rvgl::emu {
class Emulator;
}

namespace rvgl::emu::fast {

// fds below this are marked in a byte map; above it, a count says whether any exist.
inline constexpr int kMarkedFds = 1 << 16;

extern Emulator *g_instance;
extern uint8_t g_fd_marks[kMarkedFds];
extern uint32_t g_big_fds;
// DIR streams on the fake /dev/dri that are open (readdir fixes their entries' d_type).
extern uint32_t g_dri_dirs;

// The bridge the emulated GPUs hang off (the usual AMD host layout: GPUs behind a root port on
// bus 0); the fake tree builds its PCI devices below it.
inline constexpr char kPciRoot[] = "/sys/devices/pci0000:00/0000:00:08.1";

static inline Emulator *instance() {
  return __atomic_load_n(&g_instance, __ATOMIC_ACQUIRE);
}

static inline bool fd_maybe_ours(int fd) {
  if (fd < 0 || !instance()) return false;
  if (fd < kMarkedFds) return __atomic_load_n(&g_fd_marks[fd], __ATOMIC_ACQUIRE) != 0;
  return __atomic_load_n(&g_big_fds, __ATOMIC_ACQUIRE) != 0;
}

// `path` starts with `prefix` followed by the end or a '/'. A loop, not strncmp: a sanitizer's
// strncmp interceptor is as unready as the rest of it early on.
static inline bool path_has_prefix(const char *path, const char *prefix, bool whole_component) {
  for (; *prefix; ++path, ++prefix)
    if (*path != *prefix) return false;
  return !whole_component || *path == '\0' || *path == '/';
}

// A cheap superset of the paths the fake tree rewrites.
static inline bool path_maybe_emulated(const char *path) {
  if (!path || path[0] != '/') return false;
  if (path[1] == 'd')
    return path_has_prefix(path, "/dev/dri", true) || path_has_prefix(path, "/dev/udmabuf", true);
  if (path[1] != 's') return false;
  return path_has_prefix(path, "/sys/dev/char/226:", false) ||
         path_has_prefix(path, kPciRoot, true) || path_has_prefix(path, "/sys/class/drm", true) ||
         path_has_prefix(path, "/sys/bus/pci/", false) ||
         path_has_prefix(path, "/sys/module/amdgpu", true);
}

// A relative path under dirfd, or dirfd itself (AT_EMPTY_PATH): only ours if dirfd is.
static inline bool at_path_maybe_emulated(int dirfd, const char *path) {
  if (path && path[0] == '/') return path_maybe_emulated(path);
  return fd_maybe_ours(dirfd);
}

}  // namespace rvgl::emu::fast
