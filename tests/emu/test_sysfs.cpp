// Acceptance (issue 16, point 6): nothing a program does under the emulator reaches the host's
// sysfs or procfs; the fake PCI device can be removed (drm_dev_unplug: the nodes disappear and
// every later ioctl on an open file fails with ENODEV) and a bus rescan brings it back; `ls -l`
// of the fake device directory works.
#include <dirent.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>

#include <set>

#include <catch2/catch.hpp>

#include "emu_test_support.h"

using namespace rvgl::emu_test;

namespace {

// What the host's procfs holds, read with raw syscalls the emulator cannot see.
std::string raw_read(const char *path) {
  const int fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC));
  if (fd < 0) return "<" + std::to_string(errno) + ">";
  char buf[256];
  const ssize_t n = read(fd, buf, sizeof(buf));
  syscall(SYS_close, fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::string comm() {
  char name[17] = {};
  prctl(PR_GET_NAME, name);
  return name;
}

int write_text(const char *path, const char *text) {
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  const ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == static_cast<ssize_t>(strlen(text)) ? 0 : -EIO;
}

std::set<std::string> entries(const char *dir) {
  std::set<std::string> out;
  DIR *d = opendir(dir);
  if (!d) return out;
  while (dirent *e = readdir(d))
    if (e->d_name[0] != '.') out.insert(e->d_name);
  closedir(d);
  return out;
}

// The PCI slot of a render node, as libdrm finds it.
std::string slot_of(const std::string &render) {
  char buf[256] = {};
  const std::string link = "/sys/class/drm/" + render + "/device";
  const ssize_t n = readlink(link.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return {};
  const std::string target(buf, static_cast<size_t>(n));
  return target.substr(target.find_last_of('/') + 1);
}

}  // namespace

TEST_CASE("no write reaches the host's /sys or /proc", "[kernel][sysfs]") {
  const std::string name_before = comm();
  const std::string oom_before = raw_read("/proc/self/oom_score_adj");

  SECTION("opens for writing, by every spelling of the path") {
    CHECK(write_text("/proc/self/comm", "rvgl-absorbed") == 0);
    CHECK(write_text("/tmp/../proc/self/comm", "rvgl-absorbed") == 0);
    CHECK(write_text("//proc//self/./comm", "rvgl-absorbed") == 0);
    CHECK(write_text("/proc/self/oom_score_adj", "7") == 0);
    FILE *f = fopen("/proc/self/comm", "w");
    REQUIRE(f != nullptr);
    CHECK(fputs("rvgl-fopen", f) >= 0);
    CHECK(fclose(f) == 0);
    const int dir = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    REQUIRE(dir >= 0);
    const int fd = openat(dir, "comm", O_WRONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    close(dir);
    char cwd[4096];
    REQUIRE(getcwd(cwd, sizeof(cwd)) != nullptr);
    REQUIRE(chdir("/proc/self") == 0);
    CHECK(write_text("comm", "rvgl-relative") == 0);
    REQUIRE(chdir(cwd) == 0);
    // A symlink elsewhere that points into procfs.
    char tmpl[] = "/tmp/rvgl-sysfs-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    const std::string link = std::string(tmpl) + "/comm";
    REQUIRE(symlink("/proc/self/comm", link.c_str()) == 0);
    CHECK(write_text(link.c_str(), "rvgl-symlink") == 0);
    CHECK(unlink(link.c_str()) == 0);
    CHECK(rmdir(tmpl) == 0);
  }
  SECTION("names sysfs lacks are refused; changes to the tree are refused") {
    errno = 0;
    CHECK(open("/sys/rvgl-no-such-attribute", O_WRONLY | O_CREAT | O_CLOEXEC, 0644) == -1);
    CHECK(errno == EACCES);
    errno = 0;
    CHECK(mkdir("/sys/rvgl-test", 0755) == -1);
    CHECK(errno == EACCES);
    errno = 0;
    CHECK(truncate("/proc/self/comm", 0) == -1);
    CHECK(errno == EACCES);
    errno = 0;
    CHECK(unlink("/sys/bus/pci/rescan") == -1);
    CHECK(errno == EACCES);
    errno = 0;
    CHECK(unlink("/dev/dri/renderD128") == -1);
    CHECK(errno == EACCES);
    errno = 0;
    CHECK(chmod("/sys/class/drm/renderD128/device/vendor", 0666) == -1);
    CHECK(errno == EACCES);
    // A read-only attribute of the fake device has no store: EACCES, as sysfs answers.
    errno = 0;
    CHECK(open("/sys/class/drm/renderD128/device/vendor", O_WRONLY | O_CLOEXEC) == -1);
    CHECK(errno == EACCES);
    // /sys/bus/pci/rescan is the fake bus's: a pipe the emulator reads, not the host's file.
    const int fd = open("/sys/bus/pci/rescan", O_WRONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    struct stat st;
    REQUIRE(fstat(fd, &st) == 0);
    CHECK(S_ISFIFO(st.st_mode));
    CHECK(write(fd, "0\n", 2) == 2);  // 0: nothing to do
    close(fd);
  }
  SECTION("reopening one's own fd through /proc/self/fd writes that file") {
    char path[] = "/tmp/rvgl-fdlink-XXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    const std::string self = "/proc/self/fd/" + std::to_string(fd);
    CHECK(write_text(self.c_str(), "through-proc") == 0);
    char buf[32] = {};
    CHECK(pread(fd, buf, sizeof(buf), 0) == 12);
    CHECK(std::string(buf) == "through-proc");
    close(fd);
    unlink(path);
  }
  CHECK(comm() == name_before);
  CHECK(raw_read("/proc/self/oom_score_adj") == oom_before);
}

// drivers/pci/pci-sysfs.c remove_store -> amdgpu_pci_remove -> drm_dev_unplug (drm_drv.c): the
// minors go, drm_ioctl answers -ENODEV on files still open; rescan_store probes the device again.
TEST_CASE("removing the fake PCI device unplugs it; a rescan brings it back", "[kernel][sysfs]") {
  Knob two("RVGL_EMU_DEVICES", "2", "1");
  REQUIRE(two.rc() == 0);
  const std::string slot = slot_of("renderD129");
  REQUIRE(!slot.empty());
  const std::string remove = "/sys/bus/pci/devices/" + slot + "/remove";
  Fd render = open_render(1);
  Fd card(open("/dev/dri/card1", O_RDWR | O_CLOEXEC));
  Fd other = open_render(0);
  REQUIRE(render.get() >= 0);
  REQUIRE(card.get() >= 0);
  REQUIRE(other.get() >= 0);
  uint32_t ctx = 0;
  REQUIRE(ctx_create(render.get(), &ctx) == 0);

  CHECK(write_text(remove.c_str(), "0") == 0);  // 0 removes nothing
  CHECK(ctx_create(render.get(), &ctx) == 0);
  CHECK(entries("/dev/dri").count("renderD129") == 1);

  REQUIRE(write_text(remove.c_str(), "1\n") == 0);
  CHECK(ctx_create(render.get(), &ctx) == -ENODEV);
  uint32_t v = 0;
  CHECK(query_info(render.get(), AMDGPU_INFO_ACCEL_WORKING, &v, 4) == -ENODEV);
  drm_auth magic{};
  CHECK(xioctl(card.get(), DRM_IOCTL_GET_MAGIC, &magic) == -ENODEV);
  errno = 0;
  CHECK(open("/dev/dri/renderD129", O_RDWR | O_CLOEXEC) == -1);
  CHECK(errno == ENOENT);
  struct stat st;
  CHECK(stat("/sys/class/drm/renderD129", &st) == -1);
  CHECK(stat(("/sys/bus/pci/devices/" + slot).c_str(), &st) == -1);
  const std::set<std::string> dri = entries("/dev/dri");
  CHECK(dri.count("renderD129") == 0);
  CHECK(dri.count("card1") == 0);
  CHECK(dri.count("renderD128") == 1);
  // The other device is untouched.
  uint32_t other_ctx = 0;
  CHECK(ctx_create(other.get(), &other_ctx) == 0);

  REQUIRE(write_text("/sys/bus/pci/rescan", "1") == 0);
  CHECK(entries("/dev/dri").count("renderD129") == 1);
  CHECK(slot_of("renderD129") == slot);
  Fd again = open_render(1);
  REQUIRE(again.get() >= 0);
  CHECK(ctx_create(again.get(), &ctx) == 0);
  // Files opened before the removal stay unplugged: they belong to the device that went away.
  CHECK(ctx_create(render.get(), &ctx) == -ENODEV);
}

TEST_CASE("ls -l of the fake device directory sees every entry", "[kernel][sysfs]") {
  const std::string dir = "/sys/bus/pci/devices/" + slot_of("renderD128");
  const std::set<std::string> names = entries(dir.c_str());
  REQUIRE(names.count("vendor") == 1);
  REQUIRE(names.count("remove") == 1);
  DIR *d = opendir(dir.c_str());
  REQUIRE(d != nullptr);
  for (const auto &n : names) {
    const std::string full = dir + "/" + n;
    struct stat st;
    CHECK(lstat(full.c_str(), &st) == 0);
    CHECK(fstatat(dirfd(d), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0);
    // ls -l asks for the security label of each entry; "no such attribute", not "no such file".
    char label[256];
    errno = 0;
    const ssize_t r = lgetxattr(full.c_str(), "security.selinux", label, sizeof(label));
    CHECK((r >= 0 || errno == ENODATA || errno == EOPNOTSUPP));
    CHECK(llistxattr(full.c_str(), label, sizeof(label)) >= 0);
  }
  closedir(d);
}
