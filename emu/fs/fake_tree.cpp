#include "fs/fake_tree.h"

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/fast_state.h"
#include "interpose/real_libc.h"

namespace rvgl::emu {

namespace {

using fast::kPciRoot;
// Buses from 0xc1 keep clear of the low buses real on-board devices use.
constexpr int kFirstBus = 0xc1;

constexpr const char *kFixedPrefixes[] = {"/dev/dri",
                                          "/dev/udmabuf",
                                          "/sys/class/drm",
                                          "/sys/bus/pci/drivers/amdgpu",
                                          "/sys/bus/pci/rescan",
                                          "/sys/module/amdgpu"};

bool has_prefix(const char *path, const std::string_view prefix) {
  if (std::strncmp(path, prefix.data(), prefix.size()) != 0) return false;
  const char next = path[prefix.size()];
  return next == '\0' || next == '/';
}

bool write_file(const std::string &path, const void *data, size_t len, mode_t mode = 0444) {
  const int fd = real::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const bool ok = ::write(fd, data, len) == static_cast<ssize_t>(len);
  fchmod(fd, mode);
  real::close(fd);
  return ok;
}

bool write_text(const std::string &path, const std::string &text, mode_t mode = 0444) {
  return write_file(path, text.data(), text.size(), mode);
}

bool make_dirs(const std::string &path) {
  std::string cur;
  size_t pos = 1;
  while (true) {
    const size_t slash = path.find('/', pos);
    cur = path.substr(0, slash);
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return false;
    if (slash == std::string::npos) return true;
    pos = slash + 1;
  }
}

std::string hex(unsigned v, int width) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%0*x\n", width, v);
  return buf;
}

int remove_entry(const char *path, const struct stat *, int, FTW *) {
  return ::remove(path);
}

void remove_tree(const std::string &root) {
  ::nftw(root.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

// Trees of processes that died without cleaning up (killed tests) are removed by the next user.
void sweep_stale_trees(const std::string &state_dir) {
  DIR *d = real::opendir(state_dir.c_str());
  if (!d) return;
  while (dirent *e = real::readdir(d)) {
    long pid = 0;
    if (std::sscanf(e->d_name, "tree-%ld-", &pid) != 1 || pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    remove_tree(state_dir + "/" + e->d_name);
  }
  real::closedir(d);
}

// The emulator is never destroyed (its threads may outlive main), so trees are removed at exit by
// the process that made them.
struct OwnedTree {
  pid_t pid;
  std::string root;
};
std::vector<OwnedTree> *g_owned = nullptr;
std::mutex g_owned_mu;

void remove_owned_trees() {
  std::lock_guard lk(g_owned_mu);
  if (!g_owned) return;
  for (const auto &t : *g_owned)
    if (t.pid == getpid()) remove_tree(t.root);
}

void own_tree(const std::string &root) {
  std::lock_guard lk(g_owned_mu);
  if (!g_owned) {
    g_owned = new std::vector<OwnedTree>;
    std::atexit(remove_owned_trees);
  }
  g_owned->push_back({getpid(), root});
}

void disown_tree(const std::string &root) {
  std::lock_guard lk(g_owned_mu);
  if (g_owned) std::erase_if(*g_owned, [&](const OwnedTree &t) { return t.root == root; });
}

}  // namespace

std::string FakeTree::pci_slot(int device) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0000:%02x:00.0", kFirstBus + device);
  return buf;
}

bool FakeTree::maybe_emulated(const char *path) {
  return fast::path_maybe_emulated(path);
}

std::unique_ptr<FakeTree> FakeTree::create(const Config &cfg) {
  if (!make_dirs(cfg.state_dir)) return nullptr;
  ::chmod(cfg.state_dir.c_str(), 0700);
  sweep_stale_trees(cfg.state_dir);
  std::string tmpl = cfg.state_dir + "/tree-" + std::to_string(getpid()) + "-XXXXXX";
  if (!::mkdtemp(tmpl.data())) return nullptr;
  std::unique_ptr<FakeTree> t(new FakeTree(tmpl, cfg));
  own_tree(tmpl);
  if (!t->build(cfg)) {
    const int err = errno ? errno : EIO;
    t.reset();
    errno = err;
    return nullptr;
  }
  return t;
}

FakeTree::FakeTree(std::string root, const Config &cfg)
    : root_(std::move(root)),
      dri_dir_(root_ + "/dev/dri"),
      devices_(cfg.devices),
      vram_bytes_(cfg.vram()),
      gtt_bytes_(cfg.gtt()),
      xccs_(cfg.xcc_count()),
      profile_(cfg.profile),
      removed_(cfg.devices, false),
      owner_pid_(getpid()) {
  for (uint32_t i = 0; i < devices_; ++i) {
    prefixes_.push_back(std::string(kPciRoot) + "/" + pci_slot(static_cast<int>(i)));
    prefixes_.push_back("/sys/dev/char/226:" + std::to_string(i));
    prefixes_.push_back("/sys/dev/char/226:" + std::to_string(kRenderMinorBase + i));
    prefixes_.push_back("/sys/bus/pci/devices/" + pci_slot(static_cast<int>(i)));
  }
}

FakeTree::~FakeTree() {
  // A forked child shares the parent's tree; only its creator removes it.
  if (getpid() == owner_pid_) {
    remove_tree(root_);
    disown_tree(root_);
  }
}

bool FakeTree::build(const Config &cfg) {
  const DeviceProfile &p = *cfg.profile;
  const std::string sys = root_ + "/sys";
  if (!make_dirs(dri_dir_) || !make_dirs(sys + "/dev/char") || !make_dirs(sys + "/class/drm") ||
      !make_dirs(sys + "/bus/pci/devices") || !make_dirs(sys + "/bus/pci/drivers/amdgpu") ||
      !make_dirs(dri_dir_ + "/by-path"))
    return false;
  if (!write_text(root_ + "/dev/udmabuf", "", 0666)) return false;
  // drm_sysfs.c: the class's version attribute.
  if (!write_text(sys + "/class/drm/version", "drm 1.1.0 20060810\n")) return false;

  // The bus's rescan attribute (pci-sysfs.c bus_attr_rescan), and where absorbed writes go.
  if (!write_text(sys + "/bus/pci/rescan", "", 0200) || !make_dirs(root_ + "/absorbed"))
    return false;
  if (!make_dirs(sys + "/module/amdgpu/parameters") || !write_module_parameters(cfg)) return false;
  for (uint32_t i = 0; i < devices_; ++i)
    if (!build_device(p, static_cast<int>(i))) return false;
  return true;
}

bool FakeTree::write_module_parameters(const Config &cfg) {
  // amdgpu_drv.c: module_param_named(vm_fault_stop, ..., int, 0444), printed "%d\n". Written
  // aside and renamed over the old file, so a reader sees one value or the other, never a
  // truncated file.
  const std::string dir = root_ + "/sys/module/amdgpu/parameters";
  const std::string text = std::to_string(cfg.vm_fault_stop) + "\n";
  return write_text(dir + "/.vm_fault_stop.new", text) &&
         real::renameat(AT_FDCWD, (dir + "/.vm_fault_stop.new").c_str(), AT_FDCWD,
                        (dir + "/vm_fault_stop").c_str()) == 0;
}

// A partitionable part describes its compute partitioning the way amdgpu does: the mode in
// amdgpu_gfx.c's current_compute_partition / available_compute_partition, and amdgpu_xcp.c's
// compute_partition_config (xcp_config, supported_xcp_configs, and per resource the instances
// of one partition: xcc/num_inst, dma/num_inst, num_shared). The mode follows from the XCCs per
// node: all of them SPX, half DPX, a quarter QPX, one CPX.
bool FakeTree::write_partition_attributes(const DeviceProfile &p, const std::string &devdir) {
  if (!p.partitionable) return true;
  const uint32_t all = p.default_xccs;
  const char *mode = xccs_ == all       ? "SPX"
                     : xccs_ * 2 == all ? "DPX"
                     : xccs_ * 4 == all ? "QPX"
                     : xccs_ == 1       ? "CPX"
                                        : "UNKNOWN";
  const std::string cfgdir = devdir + "/compute_partition_config";
  const uint32_t sdma = p.sdma_rings_per_xcc ? p.sdma.rings * xccs_ : p.sdma.rings;
  return make_dirs(cfgdir + "/xcc") && make_dirs(cfgdir + "/dma") &&
         write_text(devdir + "/current_compute_partition", std::string(mode) + "\n") &&
         write_text(devdir + "/available_compute_partition", "SPX, DPX, QPX, CPX\n") &&
         write_text(cfgdir + "/xcp_config", std::string(mode) + "\n") &&
         write_text(cfgdir + "/supported_xcp_configs", "SPX, DPX, QPX, CPX\n") &&
         write_text(cfgdir + "/xcc/num_inst", std::to_string(xccs_) + "\n") &&
         write_text(cfgdir + "/xcc/num_shared", "0\n") &&
         write_text(cfgdir + "/dma/num_inst", std::to_string(sdma) + "\n") &&
         write_text(cfgdir + "/dma/num_shared", "0\n");
}

bool FakeTree::build_device(const DeviceProfile &p, int dev) {
  const std::string sys = root_ + "/sys";
  const std::string root_port = root_ + kPciRoot;
  {
    const std::string slot = pci_slot(dev);
    const std::string devdir = root_port + "/" + slot;
    const std::string card = "card" + std::to_string(dev);
    const std::string render = "renderD" + std::to_string(kRenderMinorBase + dev);
    if (!make_dirs(devdir + "/drm/" + card) || !make_dirs(devdir + "/drm/" + render)) return false;

    // The PCI function, as drivers/pci/pci-sysfs.c presents it.
    char uevent[512];
    std::snprintf(uevent, sizeof(uevent),
                  "DRIVER=amdgpu\nPCI_CLASS=%X\nPCI_ID=%04X:%04X\nPCI_SUBSYS_ID=%04X:%04X\n"
                  "PCI_SLOT_NAME=%s\nMODALIAS=pci:v%08Xd%08Xsv%08Xsd%08Xbc%02Xsc%02Xi%02X\n",
                  p.pci_class, p.pci_vendor, p.pci_device, p.pci_subvendor, p.pci_subdevice,
                  slot.c_str(), p.pci_vendor, p.pci_device, p.pci_subvendor, p.pci_subdevice,
                  (p.pci_class >> 16) & 0xff, (p.pci_class >> 8) & 0xff, p.pci_class & 0xff);
    // The type-0 configuration header (PCI local bus spec): IDs at 0x00/0x02, command 0x04,
    // status 0x06, revision 0x08, class code 0x09-0x0b, subsystem IDs at 0x2c/0x2e.
    uint8_t config[256] = {};
    config[0] = p.pci_vendor & 0xff;
    config[1] = p.pci_vendor >> 8;
    config[2] = p.pci_device & 0xff;
    config[3] = p.pci_device >> 8;
    config[4] = 0x07;  // command: I/O, memory, bus master
    config[6] = 0x10;  // status: capabilities list
    config[8] = p.pci_revision;
    config[9] = p.pci_class & 0xff;
    config[10] = (p.pci_class >> 8) & 0xff;
    config[11] = (p.pci_class >> 16) & 0xff;
    config[44] = p.pci_subvendor & 0xff;
    config[45] = p.pci_subvendor >> 8;
    config[46] = p.pci_subdevice & 0xff;
    config[47] = p.pci_subdevice >> 8;
    char classbuf[32];
    std::snprintf(classbuf, sizeof(classbuf), "0x%06x\n", p.pci_class);
    bool ok = write_text(devdir + "/uevent", uevent) &&
              write_file(devdir + "/config", config, sizeof(config)) &&
              write_text(devdir + "/vendor", hex(p.pci_vendor, 4)) &&
              write_text(devdir + "/device", hex(p.pci_device, 4)) &&
              write_text(devdir + "/subsystem_vendor", hex(p.pci_subvendor, 4)) &&
              write_text(devdir + "/subsystem_device", hex(p.pci_subdevice, 4)) &&
              write_text(devdir + "/revision", hex(p.pci_revision, 2)) &&
              write_text(devdir + "/class", classbuf) &&
              write_text(devdir + "/numa_node", "-1\n") && write_text(devdir + "/enable", "1\n") &&
              write_text(devdir + "/mem_info_vram_total", std::to_string(vram_bytes_) + "\n") &&
              write_text(devdir + "/mem_info_gtt_total", std::to_string(gtt_bytes_) + "\n") &&
              write_text(devdir + "/remove", "", 0200) &&
              ::symlink("../../../../bus/pci", (devdir + "/subsystem").c_str()) == 0 &&
              ::symlink("../../../../bus/pci/drivers/amdgpu", (devdir + "/driver").c_str()) == 0;
    if (!ok || !write_partition_attributes(p, devdir)) return false;

    // The DRM minors (drivers/gpu/drm/drm_sysfs.c): uevent, dev, subsystem and device links.
    for (const auto &[name, minor] :
         {std::pair{card, dev}, std::pair{render, kRenderMinorBase + dev}}) {
      const std::string mdir = devdir + "/drm/" + name;
      char muevent[128];
      std::snprintf(muevent, sizeof(muevent),
                    "MAJOR=%d\nMINOR=%d\nDEVNAME=dri/%s\nDEVTYPE=drm_minor\n", kDrmMajor, minor,
                    name.c_str());
      const std::string rel =
          std::string("../../devices/pci0000:00/0000:00:08.1/") + slot + "/drm/" + name;
      ok = write_text(mdir + "/uevent", muevent) &&
           write_text(mdir + "/dev",
                      std::to_string(kDrmMajor) + ":" + std::to_string(minor) + "\n") &&
           ::symlink("../../../../../../class/drm", (mdir + "/subsystem").c_str()) == 0 &&
           ::symlink(("../../../" + slot).c_str(), (mdir + "/device").c_str()) == 0 &&
           ::symlink(rel.c_str(),
                     (sys + "/dev/char/" + std::to_string(kDrmMajor) + ":" + std::to_string(minor))
                         .c_str()) == 0 &&
           ::symlink(rel.c_str(), (sys + "/class/drm/" + name).c_str()) == 0 &&
           write_text(dri_dir_ + "/" + name, "", 0666);
      if (!ok) return false;
    }
    const std::string devlink = "devices/pci0000:00/0000:00:08.1/" + slot;
    ok = ::symlink(("../../../" + devlink).c_str(), (sys + "/bus/pci/devices/" + slot).c_str()) ==
             0 &&
         ::symlink(("../../../../" + devlink).c_str(),
                   (sys + "/bus/pci/drivers/amdgpu/" + slot).c_str()) == 0 &&
         ::symlink(("../" + card).c_str(), (dri_dir_ + "/by-path/pci-" + slot + "-card").c_str()) ==
             0 &&
         ::symlink(("../" + render).c_str(),
                   (dri_dir_ + "/by-path/pci-" + slot + "-render").c_str()) == 0;
    if (!ok) return false;
  }
  return true;
}

void FakeTree::remove_device(int dev) {
  if (dev < 0 || dev >= static_cast<int>(devices_) || removed_[dev]) return;
  removed_[dev] = true;
  const std::string sys = root_ + "/sys";
  const std::string slot = pci_slot(dev);
  const std::string card = "card" + std::to_string(dev);
  const std::string render = "renderD" + std::to_string(kRenderMinorBase + dev);
  for (const std::string &link :
       {dri_dir_ + "/" + card, dri_dir_ + "/" + render, dri_dir_ + "/by-path/pci-" + slot + "-card",
        dri_dir_ + "/by-path/pci-" + slot + "-render", sys + "/class/drm/" + card,
        sys + "/class/drm/" + render, sys + "/dev/char/226:" + std::to_string(dev),
        sys + "/dev/char/226:" + std::to_string(kRenderMinorBase + dev),
        sys + "/bus/pci/devices/" + slot, sys + "/bus/pci/drivers/amdgpu/" + slot})
    ::unlink(link.c_str());
  remove_tree(root_ + kPciRoot + "/" + slot);
}

int FakeTree::rescan() {
  int back = 0;
  for (uint32_t i = 0; i < devices_; ++i) {
    if (!removed_[i]) continue;
    if (!build_device(*profile_, static_cast<int>(i))) continue;
    removed_[i] = false;
    ++back;
  }
  return back;
}

bool FakeTree::present(int dev) const {
  return dev >= 0 && dev < static_cast<int>(devices_) && !removed_[dev];
}

FakeTree::Attribute FakeTree::attribute_at(const std::string &real_path, int &device) const {
  if (real_path == root_ + "/sys/bus/pci/rescan") return Attribute::Rescan;
  char buf[PATH_MAX];
  if (!real::realpath(real_path.c_str(), buf)) return Attribute::None;
  const std::string_view r = buf;
  const std::string port = root_ + kPciRoot + "/";
  if (!r.starts_with(port) || !r.ends_with("/remove")) return Attribute::None;
  const std::string_view slot = r.substr(port.size(), r.size() - port.size() - 7);
  for (uint32_t i = 0; i < devices_; ++i)
    if (slot == pci_slot(static_cast<int>(i))) {
      device = static_cast<int>(i);
      return Attribute::Remove;
    }
  return Attribute::None;
}

std::string FakeTree::absorb_path(std::string_view public_path) const {
  std::string name;
  for (char c : public_path)
    name += (c == '/') ? '!' : c;
  if (name.size() > 200) name.resize(200);
  return root_ + "/absorbed/" + name;
}

bool FakeTree::rewrite(const char *path, std::string &out) const {
  if (!maybe_emulated(path)) return false;
  bool hit = false;
  for (const char *p : kFixedPrefixes)
    if (has_prefix(path, p)) hit = true;
  for (size_t i = 0; !hit && i < prefixes_.size(); ++i)
    if (has_prefix(path, prefixes_[i])) hit = true;
  if (!hit) return false;
  out.assign(root_);
  out.append(path);
  return true;
}

bool FakeTree::to_public(std::string_view real, std::string &out) const {
  if (real.size() <= root_.size() || real.compare(0, root_.size(), root_) != 0 ||
      real[root_.size()] != '/')
    return false;
  out.assign(real.substr(root_.size()));
  return true;
}

NodeRef FakeTree::node_for_name(std::string_view name) const {
  NodeRef n;
  int idx = -1;
  auto number = [&](std::string_view digits) {
    if (digits.empty() || digits.size() > 4) return -1;
    int v = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return -1;
      v = v * 10 + (c - '0');
    }
    return v;
  };
  if (name.starts_with("renderD")) {
    idx = number(name.substr(7)) - kRenderMinorBase;
    if (idx >= 0 && idx < static_cast<int>(devices_)) n = {NodeRef::Kind::Render, idx};
  } else if (name.starts_with("card")) {
    idx = number(name.substr(4));
    if (idx >= 0 && idx < static_cast<int>(devices_)) n = {NodeRef::Kind::Primary, idx};
  }
  return n;
}

NodeRef FakeTree::node_at(const std::string &real_path) const {
  std::string resolved = real_path;
  if (real_path.find("/by-path/") != std::string::npos ||
      real_path.find("/../") != std::string::npos || real_path.find("//") != std::string::npos) {
    char buf[PATH_MAX];
    if (!real::realpath(real_path.c_str(), buf)) return {};
    resolved = buf;
  }
  if (resolved == root_ + "/dev/udmabuf") return {NodeRef::Kind::Udmabuf, -1};
  if (resolved.size() <= dri_dir_.size() + 1 ||
      resolved.compare(0, dri_dir_.size(), dri_dir_) != 0 || resolved[dri_dir_.size()] != '/')
    return {};
  return node_for_name(std::string_view(resolved).substr(dri_dir_.size() + 1));
}

bool FakeTree::is_dri_dir(const std::string &real_path) const {
  std::string_view p = real_path;
  while (p.size() > 1 && p.back() == '/')
    p.remove_suffix(1);
  return p == dri_dir_;
}

}  // namespace rvgl::emu
