// Where rvgl-serve finds what it preloads and runs: beside itself, in an installed tree
// (<bindir>/<libdir from bindir>/librocm_virgl.so, .../rocm-virgl/librvgl_emu.so,
// <bindir>/rvgl-info) or in the build tree (tools/serve/ next to vrend-hooks/, emu/ and
// tools/info/). Relative to the program's own location, so a tree installed with DESTDIR or moved
// elsewhere still works.
#pragma once

#include <string>

namespace rvgl::serve {

struct InstallLayout {
  std::string hooks;      // librocm_virgl.so
  std::string emulator;   // librvgl_emu.so
  std::string rvgl_info;  // the rvgl-info program
};

// The first existing candidate for each; "" where none exists.
InstallLayout find_install_layout();

// The directory holding this program (from /proc/self/exe).
std::string program_dir();

}  // namespace rvgl::serve
