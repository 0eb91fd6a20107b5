#include "interpose/emulated_paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>

#include "core/counters.h"
#include "core/device_file.h"
#include "core/emulator.h"
#include "core/runtime_knobs.h"
#include "fs/sysfs_attributes.h"
#include "interpose/real_libc.h"

namespace rvgl::emu {

namespace {
// /dev/udmabuf is a misc device (major 10); its minor is dynamic, this is a typical one.
constexpr int kMiscMajor = 10, kUdmabufMinor = 125;
}  // namespace

bool rewrite_path(const char *path, std::string &out) {
  if (!FakeTree::maybe_emulated(path)) return false;
  apply_sysfs_writes();  // a removal written just before shows in what this path resolves to
  Emulator &e = Emulator::get();
  std::lock_guard lk(e.mutex());
  FakeTree *t = e.tree_locked();
  return t && t->rewrite(path, out);
}

NodeRef node_at_rewritten(const std::string &real_path) {
  Emulator &e = Emulator::get();
  std::lock_guard lk(e.mutex());
  FakeTree *t = e.tree_locked();
  return t ? t->node_at(real_path) : NodeRef{};
}

int open_node(const NodeRef &node, const std::string &real_path, int flags) {
  Emulator &e = Emulator::get();
  if (int err = e.faults().on_call("OPEN")) {
    counters().injected_failures.fetch_add(1, std::memory_order_relaxed);
    errno = err;
    return -1;
  }
  const int fd = real::open(real_path.c_str(), flags & (O_ACCMODE | O_CLOEXEC | O_NONBLOCK), 0);
  if (fd < 0) return -1;
  std::lock_guard lk(e.mutex());
  std::shared_ptr<OpenFile> f;
  if (node.kind == NodeRef::Kind::Udmabuf) {
    f = std::make_shared<UdmabufDeviceFile>();
  } else {
    Device *d = e.device(node.device);
    if (!d) {
      real::close(fd);
      errno = ENODEV;
      return -1;
    }
    f = std::make_shared<DeviceFile>(*d, node.kind == NodeRef::Kind::Primary);
  }
  e.fds().set(fd, std::move(f));
  note_device_opened();
  return fd;
}

void fake_node_stat(const NodeRef &node, struct stat &st) {
  st.st_mode = S_IFCHR | 0666;
  st.st_size = 0;
  st.st_blocks = 0;
  st.st_rdev = node.kind == NodeRef::Kind::Udmabuf ? makedev(kMiscMajor, kUdmabufMinor)
                                                   : makedev(kDrmMajor, node.node_minor());
}

void fake_node_statx(const NodeRef &node, struct statx &stx) {
  stx.stx_mode = S_IFCHR | 0666;
  stx.stx_size = 0;
  stx.stx_blocks = 0;
  const bool misc = node.kind == NodeRef::Kind::Udmabuf;
  stx.stx_rdev_major = misc ? kMiscMajor : kDrmMajor;
  stx.stx_rdev_minor = misc ? kUdmabufMinor : static_cast<unsigned>(node.node_minor());
}

NodeRef node_of_fd(int fd) {
  Emulator *e = Emulator::peek();
  if (!e || !e->fds().maybe_tracked(fd)) return {};
  std::lock_guard lk(e->mutex());
  auto f = e->fds().get(fd);
  if (!f) return {};
  if (f->kind() == OpenFile::Kind::UdmabufDevice) return {NodeRef::Kind::Udmabuf, -1};
  if (f->kind() != OpenFile::Kind::Device) return {};
  auto &df = static_cast<DeviceFile &>(*f);
  return {df.primary ? NodeRef::Kind::Primary : NodeRef::Kind::Render, df.device.index()};
}

void track_tree_dir(int fd, const char *public_path) {
  Emulator &e = Emulator::get();
  std::lock_guard lk(e.mutex());
  e.fds().set(fd, std::make_shared<TreeDirFile>(public_path));
}

bool resolve_at(int dirfd, const char *rel, std::string &public_path) {
  if (!rel || rel[0] == '/' || rel[0] == '\0') return false;
  Emulator *e = Emulator::peek();
  if (!e || !e->fds().maybe_tracked(dirfd)) return false;
  std::lock_guard lk(e->mutex());
  auto f = e->fds().get(dirfd);
  if (!f || f->kind() != OpenFile::Kind::TreeDir) return false;
  public_path = static_cast<TreeDirFile &>(*f).path + "/" + rel;
  return true;
}

std::string node_public_path(const NodeRef &node) {
  switch (node.kind) {
    case NodeRef::Kind::Render:
      return "/dev/dri/renderD" + std::to_string(node.node_minor());
    case NodeRef::Kind::Primary:
      return "/dev/dri/card" + std::to_string(node.node_minor());
    case NodeRef::Kind::Udmabuf:
      return "/dev/udmabuf";
    case NodeRef::Kind::None:
      break;
  }
  return {};
}

}  // namespace rvgl::emu
