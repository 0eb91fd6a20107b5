#include "fs/sysfs_attributes.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/device_file.h"
#include "core/emulator.h"
#include "util/unique_fd.h"

namespace rvgl::emu {

namespace {

constexpr size_t kMaxDevices = 16;  // RVGL_EMU_DEVICES upper bound

struct OpenAttribute {
  UniqueFd read_end;
  FakeTree::Attribute attr;
  int device;
};

std::mutex g_mu;  // inner to the state lock
std::vector<OpenAttribute> g_open;
std::atomic<size_t> g_open_count{0};
// Per device: files with an id up to this one were opened before the device was last removed.
std::array<std::atomic<uint64_t>, kMaxDevices> g_dead_up_to{};

// kstrtoul(buf, 0, &val) as the stores use it: a number (decimal, 0x.. or 0..), then at most a
// newline. False when the text is no number (the store answers EINVAL; here nothing happens).
bool parse_value(const std::string &text, unsigned long &value) {
  if (text.empty()) return false;
  char *end = nullptr;
  errno = 0;
  value = std::strtoul(text.c_str(), &end, 0);
  if (errno || end == text.c_str()) return false;
  return *end == '\0' || (*end == '\n' && end[1] == '\0');
}

// pci_stop_and_remove_bus_device -> amdgpu_pci_remove -> drm_dev_unplug.
void remove_device_locked(Emulator &e, int device) {
  FakeTree *t = e.tree_locked();
  if (!t || !t->present(device)) return;
  uint64_t newest = 0;
  e.fds().for_each([&](int, const std::shared_ptr<OpenFile> &of) {
    if (!of || of->kind() != OpenFile::Kind::Device) return;
    const auto &df = static_cast<const DeviceFile &>(*of);
    if (df.device.index() == device && df.id > newest) newest = df.id;
  });
  if (static_cast<size_t>(device) < kMaxDevices)
    g_dead_up_to[device].store(newest, std::memory_order_release);
  t->remove_device(device);
}

void act_locked(Emulator &e, const OpenAttribute &a, const std::string &text) {
  unsigned long v = 0;
  if (!parse_value(text, v) || v == 0) return;
  if (a.attr == FakeTree::Attribute::Remove) remove_device_locked(e, a.device);
  if (a.attr == FakeTree::Attribute::Rescan)
    if (FakeTree *t = e.tree_locked()) t->rescan();
}

}  // namespace

int open_sysfs_attribute(FakeTree::Attribute attr, int device, int flags) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
  UniqueFd read_end(fds[0]);
  if (::fcntl(fds[0], F_SETFL, O_NONBLOCK) != 0 ||
      (!(flags & O_CLOEXEC) && ::fcntl(fds[1], F_SETFD, 0) != 0)) {
    const int err = errno;
    real::close(fds[1]);
    errno = err;
    return -1;
  }
  std::lock_guard lk(g_mu);
  g_open.push_back({std::move(read_end), attr, device});
  g_open_count.store(g_open.size(), std::memory_order_release);
  return fds[1];
}

void apply_sysfs_writes() {
  if (g_open_count.load(std::memory_order_acquire) == 0) return;
  Emulator &e = Emulator::get();
  std::lock_guard state(e.mutex());
  std::lock_guard lk(g_mu);
  for (auto it = g_open.begin(); it != g_open.end();) {
    std::string text;
    char buf[64];
    bool closed = false;
    while (true) {
      const ssize_t n = ::read(it->read_end.get(), buf, sizeof(buf));
      if (n > 0) {
        if (text.size() < 4096) text.append(buf, static_cast<size_t>(n));
        continue;
      }
      closed = n == 0 || (errno != EAGAIN && errno != EINTR);
      break;
    }
    if (!text.empty()) act_locked(e, *it, text);
    it = closed ? g_open.erase(it) : it + 1;
  }
  g_open_count.store(g_open.size(), std::memory_order_release);
}

bool device_file_unplugged(const DeviceFile &f) {
  const int d = f.device.index();
  if (d < 0 || static_cast<size_t>(d) >= kMaxDevices) return false;
  return f.id <= g_dead_up_to[d].load(std::memory_order_acquire);
}

}  // namespace rvgl::emu
