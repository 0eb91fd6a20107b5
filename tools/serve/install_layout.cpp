#include "install_layout.h"

#include <filesystem>
#include <initializer_list>
#include <system_error>

namespace rvgl::serve {

namespace {

namespace fs = std::filesystem;

// Set by meson (tools/serve/meson.build) from the configured bindir and libdir.
#ifndef RVGL_SERVE_LIBDIR_FROM_BINDIR
#error "RVGL_SERVE_LIBDIR_FROM_BINDIR must name the installed libdir relative to bindir"
#endif
#ifndef RVGL_SERVE_PRIVATE_LIBDIR
#error "RVGL_SERVE_PRIVATE_LIBDIR must name the emulator's directory below libdir"
#endif

std::string first_existing(std::initializer_list<fs::path> candidates) {
  for (const fs::path &p : candidates) {
    std::error_code ec;
    if (fs::exists(p, ec)) return fs::absolute(p, ec).lexically_normal().string();
  }
  return "";
}

}  // namespace

std::string program_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

InstallLayout find_install_layout() {
  const fs::path bin = program_dir();
  const fs::path lib = fs::path(RVGL_SERVE_LIBDIR_FROM_BINDIR).is_absolute()
                           ? fs::path(RVGL_SERVE_LIBDIR_FROM_BINDIR)
                           : bin / RVGL_SERVE_LIBDIR_FROM_BINDIR;
  const fs::path build = bin / ".." / "..";  // <build>/tools/serve
  InstallLayout l;
  l.hooks = first_existing({lib / "librocm_virgl.so", build / "vrend-hooks" / "librocm_virgl.so"});
  l.emulator = first_existing(
      {lib / RVGL_SERVE_PRIVATE_LIBDIR / "librvgl_emu.so", build / "emu" / "librvgl_emu.so"});
  l.rvgl_info = first_existing({bin / "rvgl-info", build / "tools" / "info" / "rvgl-info"});
  return l;
}

}  // namespace rvgl::serve
