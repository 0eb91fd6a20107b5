// The process-wide emulator: configuration, the fake /dev and /sys tree, the devices, and the fds
// it handed out. Built on first use (the interposer may run before any constructor) and never
// destroyed (worker threads may still run while the process exits).
//
// Locking (outermost first): the state lock (this class: changes to the fd table, per-file
// tables, config) -> a VM's lock, a user queue's lock, an SPM unit's lock, the fault injector's
// lock -> the fence domain lock (fences, syncobjs, ring queues). Blocking waits never hold the
// state lock. Two kinds of leaf lock are taken with or without the state lock and hold nothing
// else: the fd table's (an ioctl finds its file under it alone, as fdget() takes no lock; it also
// keeps the caller's verified eventfds) and a file's syncobj table's (SYNCOBJ_EVENTFD, WAIT,
// TIMELINE_WAIT, QUERY, SIGNAL, TIMELINE_SIGNAL, RESET and TRANSFER run without the state lock, as
// drm_syncobj_find() takes only the file's syncobj_table_lock), so a registration or a health
// query never waits for a CS, which holds the state lock throughout.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "config/config.h"
#include "config/fault_injector.h"
#include "core/device.h"
#include "core/fd_table.h"
#include "fs/fake_tree.h"

namespace rvgl::emu {

class DeviceFile;

class Emulator {
 public:
  static Emulator &get();
  // Null until something made the emulator exist (fast paths of the interposer).
  static Emulator *peek();

  std::mutex &mutex() { return mu_; }
  FdTable &fds() { return fds_; }
  FaultInjector &faults() { return faults_; }

  // State lock held for the rest.
  Config &config() { return cfg_; }
  // The fake tree, built on first use; null (errno set) if it cannot be built.
  FakeTree *tree_locked();
  Device *device(int index);
  size_t device_count() const { return devices_.size(); }
  // Applies a knob; structural ones rebuild the devices and need no emulated fd open (-EBUSY).
  int set_knob_locked(std::string_view name, std::string_view value);
  // The device file behind an fd, if the fd is one of ours.
  std::shared_ptr<DeviceFile> device_file_locked(int fd);

 private:
  Emulator();
  void build_devices_locked();
  static void fork_prepare();
  static void fork_parent();
  static void fork_child();
  void lock_for_fork();
  void unlock_after_fork();

  std::mutex mu_;
  Config cfg_;
  std::unique_ptr<FakeTree> tree_;
  std::vector<std::unique_ptr<Device>> devices_;
  FdTable fds_;
  FaultInjector faults_;
  std::vector<std::mutex *> fork_locked_;  // what fork_prepare took, in order
};

}  // namespace rvgl::emu
