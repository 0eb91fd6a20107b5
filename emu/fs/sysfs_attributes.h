// Writes to the fake tree's effectful sysfs attributes (a device's `remove`, the bus's `rescan`)
// and device removal as drm_dev_unplug makes it visible.
//
// A write-open of such an attribute returns the write end of a pipe; the emulator reads what was
// written the next time the program calls into it (an ioctl, an emulated path, an open of a node),
// which is before anything the program can observe the effect with. A value other than 0 acts,
// as pci-sysfs.c remove_store / rescan_store do.
#pragma once

#include <cstdint>

#include "fs/fake_tree.h"

namespace rvgl::emu {

class DeviceFile;

// A new fd for a write-open of `attr` (device: for Remove); -1 and errno on failure.
int open_sysfs_attribute(FakeTree::Attribute attr, int device, int flags);
// Acts on whatever was written to open attributes since the last call. Takes the state lock:
// call it without holding it. Cheap when no attribute is open.
void apply_sysfs_writes();
// drm_dev_unplug: the file's device was removed after it was opened; its ioctls fail ENODEV.
bool device_file_unplugged(const DeviceFile &f);

}  // namespace rvgl::emu
