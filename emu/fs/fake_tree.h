// A private directory that mirrors what /dev/dri, /dev/udmabuf and the sysfs nodes libdrm reads
// would hold for the emulated GPUs. Intercepted paths are rewritten into it, so readdir, readlink,
// realpath and stdio behave as they do on a real machine; only the device nodes themselves (regular
// files here) need their stat faked.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace rvgl::emu {

// The DRM char major (include/drm/drm_device.h: DRM_MAJOR 226), render minors from 128.
inline constexpr int kDrmMajor = 226;
inline constexpr int kRenderMinorBase = 128;

struct NodeRef {
  enum class Kind { None, Primary, Render, Udmabuf };
  Kind kind = Kind::None;
  int device = -1;
  int node_minor() const { return kind == Kind::Render ? kRenderMinorBase + device : device; }
  explicit operator bool() const { return kind != Kind::None; }
};

class FakeTree {
 public:
  // Builds the tree under cfg.state_dir; nullptr (and errno set) on failure.
  static std::unique_ptr<FakeTree> create(const Config &cfg);
  ~FakeTree();
  FakeTree(const FakeTree &) = delete;
  FakeTree &operator=(const FakeTree &) = delete;

  // Cheap test that needs no tree: could this absolute path be an emulated one?
  static bool maybe_emulated(const char *path);

  // Maps an emulated absolute path into the tree. False when the path is not emulated.
  bool rewrite(const char *path, std::string &out) const;
  // Maps a path inside the tree back to its public spelling. False when outside the tree.
  bool to_public(std::string_view real, std::string &out) const;
  // The device node a path inside the tree resolves to (symlinks followed), if any.
  NodeRef node_at(const std::string &real_path) const;
  // Whether a directory opened at real_path is the tree's /dev/dri (its entries are char devices).
  bool is_dri_dir(const std::string &real_path) const;
  // The node a public device name denotes ("/dev/dri/renderD128"), without touching the tree.
  NodeRef node_for_name(std::string_view dri_entry) const;

  const std::string &root() const { return root_; }
  static std::string pci_slot(int device);  // "0000:c1:00.0"

  // Write-only sysfs attributes with an effect (drivers/pci/pci-sysfs.c): a device's `remove`
  // and the bus's `rescan`.
  enum class Attribute { None, Remove, Rescan };
  // Which attribute a path inside the tree names; `device` is set for Remove.
  Attribute attribute_at(const std::string &real_path, int &device) const;
  // pci_stop_and_remove_bus_device: the device's nodes and sysfs entries disappear.
  void remove_device(int device);
  // pci_rescan_bus: every removed device comes back. Returns how many did.
  int rescan();
  bool present(int device) const;
  // The module parameters the host reads (/sys/module/amdgpu/parameters): the kernel fixes
  // them at load; the emulator writes them again when a test changes the knob.
  bool write_module_parameters(const Config &cfg);
  // Where a write to a host /sys or /proc file goes instead (a file of the tree, never read).
  std::string absorb_path(std::string_view public_path) const;

 private:
  FakeTree(std::string root, const Config &cfg);
  bool build(const Config &cfg);
  bool build_device(const DeviceProfile &p, int dev);
  bool write_partition_attributes(const DeviceProfile &p, const std::string &devdir);

  std::string root_;
  std::string dri_dir_;  // root_ + "/dev/dri"
  uint32_t devices_ = 0;
  uint64_t vram_bytes_ = 0, gtt_bytes_ = 0;
  uint32_t xccs_ = 1;
  const DeviceProfile *profile_ = nullptr;
  std::vector<bool> removed_;
  pid_t owner_pid_ = 0;
  std::vector<std::string> prefixes_;  // emulated public prefixes besides the fixed ones
};

}  // namespace rvgl::emu
