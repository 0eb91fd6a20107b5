// The device nodes and sysfs tree libdrm reads: each emulated node is a distinct DRM device with
// PCI identity; stat/readdir/readlink look as they do on a machine with the GPU.
#include <amdgpu.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <xf86drm.h>

#include <catch2/catch.hpp>
#include <set>
#include <thread>

#include "emu_test_support.h"

using namespace rvgl::emu_test;

TEST_CASE("render nodes stat as DRM character devices", "[nodes]") {
  struct stat st {};
  REQUIRE(stat("/dev/dri/renderD128", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  CHECK(major(st.st_rdev) == 226);
  CHECK(minor(st.st_rdev) == 128);
  REQUIRE(stat("/dev/dri/card0", &st) == 0);
  CHECK(minor(st.st_rdev) == 0);
  CHECK(stat("/dev/dri/renderD129", &st) == -1);
  Fd fd = open_render();
  REQUIRE(fstat(fd.get(), &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  CHECK(st.st_rdev == makedev(226, 128));
  CHECK(drmGetNodeTypeFromFd(fd.get()) == DRM_NODE_RENDER);
  char link[64] = {};
  const std::string self = "/proc/self/fd/" + std::to_string(fd.get());
  REQUIRE(readlink(self.c_str(), link, sizeof(link) - 1) > 0);
  CHECK(std::string(link) == "/dev/dri/renderD128");
  char *primary = drmGetPrimaryDeviceNameFromFd(fd.get());
  REQUIRE(primary != nullptr);
  CHECK(std::string(primary) == "/dev/dri/card0");
  free(primary);
  char resolved[PATH_MAX];
  REQUIRE(realpath("/sys/dev/char/226:128/device", resolved) != nullptr);
  CHECK(std::string(resolved).rfind("/sys/devices/", 0) == 0);
}

TEST_CASE("*at() calls relative to a tree directory fd resolve under its public name", "[nodes]") {
  Fd dir(open("/dev/dri", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(dir.get() >= 0);
  struct stat st {};
  REQUIRE(fstatat(dir.get(), "renderD128", &st, 0) == 0);
  CHECK(S_ISCHR(st.st_mode));
  Fd node(openat(dir.get(), "renderD128", O_RDWR | O_CLOEXEC));
  REQUIRE(node.get() >= 0);
  uint32_t v = 0;
  CHECK(query_info(node.get(), AMDGPU_INFO_ACCEL_WORKING, &v, 4) == 0);
  CHECK(v == 1);
  Fd sys(open("/sys/dev/char/226:128/device", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(sys.get() >= 0);
  char target[256] = {};
  REQUIRE(readlinkat(sys.get(), "subsystem", target, sizeof(target) - 1) > 0);
  CHECK(std::string(target).find("bus/pci") != std::string::npos);
  CHECK(faccessat(sys.get(), "vendor", R_OK, 0) == 0);
}

TEST_CASE("/dev/dri lists the nodes as character devices", "[nodes]") {
  DIR *d = opendir("/dev/dri");
  REQUIRE(d != nullptr);
  std::set<std::string> names;
  while (dirent *e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.rfind("renderD", 0) == 0 || n.rfind("card", 0) == 0) {
      CHECK(e->d_type == DT_CHR);
      names.insert(n);
    }
  }
  closedir(d);
  CHECK(names == std::set<std::string>{"card0", "renderD128"});
}

TEST_CASE("several nodes are distinct devices to libdrm", "[nodes]") {
  Knob devices("RVGL_EMU_DEVICES", "3", "1");
  REQUIRE(devices.rc() == 0);
  drmDevicePtr list[8];
  const int n = drmGetDevices2(DRM_DEVICE_GET_PCI_REVISION, list, 8);
  REQUIRE(n == 3);
  std::set<std::string> slots;
  for (int i = 0; i < n; ++i) {
    CHECK(list[i]->bustype == DRM_BUS_PCI);
    CHECK(list[i]->deviceinfo.pci->vendor_id == 0x1002);
    CHECK((list[i]->available_nodes & (1 << DRM_NODE_RENDER)) != 0);
    const auto *b = list[i]->businfo.pci;
    slots.insert(std::to_string(b->bus) + ":" + std::to_string(b->dev));
  }
  CHECK(slots.size() == 3);
  drmFreeDevices(list, n);

  // libdrm 2.4.114 shares one amdgpu_device per primary node name: distinct nodes must not
  // collapse, two fds of one node do.
  Fd a = open_render(0), a2 = open_render(0), b = open_render(2);
  uint32_t maj, min;
  amdgpu_device_handle da, da2, db;
  REQUIRE(amdgpu_device_initialize(a.get(), &maj, &min, &da) == 0);
  REQUIRE(amdgpu_device_initialize(a2.get(), &maj, &min, &da2) == 0);
  REQUIRE(amdgpu_device_initialize(b.get(), &maj, &min, &db) == 0);
  CHECK(da == da2);
  CHECK(da != db);
  amdgpu_device_deinitialize(da);
  amdgpu_device_deinitialize(da2);
  amdgpu_device_deinitialize(db);
  // A structural knob cannot change while an emulated fd is open.
  CHECK(rvgl_emu_set_knob("RVGL_EMU_DEVICES", "2") == -EBUSY);
}

TEST_CASE("ioctls follow the kernel's conventions", "[nodes][info]") {
  Fd fd = open_render();
  const int f = fd.get();
  SECTION("DEV_INFO honours return_size: 2.4.114's 368 bytes, or the longer current struct") {
    rvgl_drm_amdgpu_info_device full{};
    std::vector<uint8_t> short_buf(sizeof(drm_amdgpu_info_device) + 16, 0xab);
    REQUIRE(query_info(f, AMDGPU_INFO_DEV_INFO, short_buf.data(), sizeof(drm_amdgpu_info_device)) ==
            0);
    CHECK(short_buf[sizeof(drm_amdgpu_info_device)] == 0xab);  // nothing past return_size
    REQUIRE(query_info(f, AMDGPU_INFO_DEV_INFO, &full, sizeof(full)) == 0);
    CHECK(std::memcmp(short_buf.data(), &full, sizeof(drm_amdgpu_info_device)) == 0);
    CHECK(full.base.virtual_address_offset == 0x10000);
    CHECK(full.base.gpu_counter_freq == 100000);
    // The PCI identity is the one the node's sysfs presents.
    auto sysfs_hex = [](const char *name) {
      unsigned v = ~0u;
      const std::string path = std::string("/sys/class/drm/renderD128/device/") + name;
      if (FILE *file = fopen(path.c_str(), "re")) {
        if (fscanf(file, "%x", &v) != 1) v = ~0u;
        fclose(file);
      }
      return v;
    };
    CHECK(full.base.device_id == sysfs_hex("device"));
    CHECK(full.base.pci_rev == sysfs_hex("revision"));
    if (default_profile() == "gfx942") {
      CHECK(full.base.family == RVGL_AMDGPU_FAMILY_AI);
      CHECK(full.userq_ip_mask == 0);
    } else {
      CHECK(full.base.family == RVGL_AMDGPU_FAMILY_GC_11_0_0);
      CHECK(full.userq_ip_mask == ((1u << AMDGPU_HW_IP_COMPUTE) | (1u << AMDGPU_HW_IP_DMA)));
    }
  }
  SECTION("INFO refuses a null or empty return buffer and unknown queries") {
    uint32_t v;
    CHECK(query_info(f, AMDGPU_INFO_ACCEL_WORKING, &v, 0) == -EINVAL);
    CHECK(query_info(f, AMDGPU_INFO_ACCEL_WORKING, nullptr, 4) == -EINVAL);
    CHECK(query_info(f, 0x7f, &v, 4) == -EINVAL);
    CHECK(query_info(f, AMDGPU_INFO_ACCEL_WORKING, reinterpret_cast<void *>(8), 4) == -EFAULT);
    uint32_t gb = 0;
    drm_amdgpu_info a{};
    a.return_pointer = reinterpret_cast<uintptr_t>(&gb);
    a.return_size = 4;
    a.query = AMDGPU_INFO_READ_MMR_REG;
    a.read_mmr_reg.dword_offset = 0x263e;
    a.read_mmr_reg.count = 1;
    a.read_mmr_reg.instance = 0xffffffff;
    CHECK(xioctl(f, DRM_IOCTL_AMDGPU_INFO, &a) == 0);
    CHECK(gb != 0);
    a.read_mmr_reg.dword_offset = 0x1234;  // not on the allow list
    CHECK(xioctl(f, DRM_IOCTL_AMDGPU_INFO, &a) == -EFAULT);
  }
  SECTION("HW_IP info for the compute and DMA engines") {
    rvgl_drm_amdgpu_info_hw_ip ip{};
    uint32_t count = 0;
    REQUIRE(query_info(f, AMDGPU_INFO_HW_IP_INFO, &ip, sizeof(ip), AMDGPU_HW_IP_COMPUTE) == 0);
    CHECK(ip.available_rings != 0);
    CHECK(ip.ip_discovery_version >> 16 == ip.hw_ip_version_major);
    REQUIRE(query_info(f, AMDGPU_INFO_HW_IP_COUNT, &count, 4, AMDGPU_HW_IP_DMA) == 0);
    CHECK(count == 1);
    REQUIRE(query_info(f, AMDGPU_INFO_HW_IP_COUNT, &count, 4, AMDGPU_HW_IP_VCN_DEC) == 0);
    CHECK(count == 0);
    CHECK(query_info(f, AMDGPU_INFO_HW_IP_INFO, &ip, sizeof(ip), 42) == -EINVAL);
  }
  SECTION("FW_VERSION answers every block the kernel knows, absent ones with version 0") {
    auto fw = [&](uint32_t type, uint32_t index, drm_amdgpu_info_firmware &out) {
      drm_amdgpu_info a{};
      a.return_pointer = reinterpret_cast<uintptr_t>(&out);
      a.return_size = sizeof(out);
      a.query = AMDGPU_INFO_FW_VERSION;
      a.query_fw.fw_type = type;
      a.query_fw.index = index;
      return xioctl(f, DRM_IOCTL_AMDGPU_INFO, &a);
    };
    drm_amdgpu_info_firmware v{1, 1};
    CHECK(fw(AMDGPU_INFO_FW_UVD, 0, v) == 0);  // Mesa's device init asks on every part
    CHECK((v.ver == 0 && v.feature == 0));
    CHECK(fw(AMDGPU_INFO_FW_GFX_MEC, 0, v) == 0);
    CHECK(v.ver != 0);
    CHECK(fw(AMDGPU_INFO_FW_GFX_MEC, 2, v) == -EINVAL);
    CHECK(fw(AMDGPU_INFO_FW_SDMA, 64, v) == -EINVAL);
    CHECK(fw(AMDGPU_INFO_FW_TA, 0, v) == -EINVAL);
    CHECK(fw(0x09, 0, v) == -EINVAL);
    CHECK(fw(0x7f, 0, v) == -EINVAL);
  }
  SECTION("memory accounting follows allocations") {
    uint64_t before = 0, after = 0;
    REQUIRE(query_info(f, AMDGPU_INFO_VRAM_USAGE, &before, 8) == 0);
    uint32_t h = 0;
    REQUIRE(gem_create(f, 3 << 20, AMDGPU_GEM_DOMAIN_VRAM, 0, &h) == 0);
    REQUIRE(query_info(f, AMDGPU_INFO_VRAM_USAGE, &after, 8) == 0);
    CHECK(after - before == (3u << 20));
    drm_amdgpu_memory_info mem{};
    REQUIRE(query_info(f, AMDGPU_INFO_MEMORY, &mem, sizeof(mem)) == 0);
    CHECK(mem.vram.heap_usage == after);
    gem_close(f, h);
    REQUIRE(query_info(f, AMDGPU_INFO_VRAM_USAGE, &after, 8) == 0);
    CHECK(after == before);
  }
  SECTION("unknown, foreign and render-forbidden ioctls") {
    CHECK(xioctl(f, DRM_IOWR(DRM_COMMAND_BASE + 0x30, drm_amdgpu_info), nullptr) == -EINVAL);
    int arg = 0;
    CHECK(xioctl(f, _IOR('T', 1, int), &arg) == -ENOTTY);
    drm_client client{};
    CHECK(xioctl(f, DRM_IOCTL_GET_CLIENT, &client) == -EACCES);
    CHECK(xioctl(f, DRM_IOCTL_AMDGPU_CTX, reinterpret_cast<void *>(16)) == -EFAULT);
  }
  SECTION("GEM_CREATE and GEM_VA validate like the kernel") {
    uint32_t h = 0;
    CHECK(gem_create(f, 4096, AMDGPU_GEM_DOMAIN_GTT, 1ull << 40, &h) == -EINVAL);
    CHECK(gem_create(f, 4096, 0x100, 0, &h) == -EINVAL);
    CHECK(gem_create(f, 0, AMDGPU_GEM_DOMAIN_GTT, 0, &h) == -EINVAL);
    REQUIRE(gem_create(f, 8192, AMDGPU_GEM_DOMAIN_GTT, 0, &h) == 0);
    CHECK(gem_va(f, AMDGPU_VA_OP_MAP, h, 0x1000, 0, 4096) == -EINVAL);  // reserved bottom
    CHECK(gem_va(f, AMDGPU_VA_OP_MAP, h, 0x800000000000ull, 0, 4096) == -EINVAL);  // the hole
    CHECK(gem_va(f, AMDGPU_VA_OP_MAP, h, 0x100000, 0, 16384) == -EINVAL);  // beyond the object
    CHECK(gem_va(f, AMDGPU_VA_OP_MAP, h, 0x100800, 0, 4096) == -EINVAL);   // unaligned
    REQUIRE(gem_va(f, AMDGPU_VA_OP_MAP, h, 0x100000, 0, 8192) == 0);
    CHECK(gem_va(f, AMDGPU_VA_OP_MAP, h, 0x101000, 0, 4096) == -EINVAL);  // overlap
    CHECK(gem_va(f, AMDGPU_VA_OP_UNMAP, h, 0x101000, 0, 4096) == -ENOENT);
    CHECK(gem_va(f, AMDGPU_VA_OP_REPLACE, h, 0x101000, 4096, 4096) == 0);
    rvgl_emu_file_counters c{};
    REQUIRE(rvgl_emu_get_file_counters(f, &c, sizeof(c)) == 0);
    CHECK(c.vm_mappings == 2);  // the first mapping was split by REPLACE
    CHECK(gem_va(f, AMDGPU_VA_OP_CLEAR, 0, 0x100000, 0, 8192) == 0);
    REQUIRE(rvgl_emu_get_file_counters(f, &c, sizeof(c)) == 0);
    CHECK(c.vm_mappings == 0);
    CHECK(gem_va(f, 9, h, 0x100000, 0, 4096) == -EINVAL);
    // The high half (above the hole) is usable and overlap-checked like the low one.
    REQUIRE(gem_va(f, AMDGPU_VA_OP_MAP, h, 0xffff800000100000ull, 0, 8192) == 0);
    CHECK(gem_va(f, AMDGPU_VA_OP_MAP, h, 0xffff800000101000ull, 0, 4096) == -EINVAL);
  }
}

TEST_CASE("the counters file is written for readers in other processes", "[nodes]") {
  char path[512] = {};
  REQUIRE(rvgl_emu_write_counters_file(path, sizeof(path)) == 0);
  FILE *f = fopen(path, "r");
  REQUIRE(f != nullptr);
  char line[128];
  bool saw = false;
  while (fgets(line, sizeof(line), f))
    if (std::strncmp(line, "bos_alive ", 10) == 0) saw = true;
  fclose(f);
  CHECK(saw);
  unlink(path);
  CHECK(std::string(path).rfind(rvgl_emu_state_dir(), 0) == 0);
}

TEST_CASE("rvgl_emu_thread_ioctls counts the calling thread's ioctls, exactly", "[nodes]") {
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  auto version = [&] {
    drm_version v{};
    return xioctl(fd.get(), DRM_IOCTL_VERSION, &v);
  };
  const uint64_t mine = rvgl_emu_thread_ioctls();
  rvgl_emu_counters before{}, after{};
  rvgl_emu_get_counters(&before, sizeof before);
  for (int i = 0; i < 3; ++i)
    REQUIRE(version() == 0);
  uint64_t theirs = 0;
  std::thread other([&] {
    const uint64_t t0 = rvgl_emu_thread_ioctls();
    for (int i = 0; i < 5; ++i)
      version();
    theirs = rvgl_emu_thread_ioctls() - t0;
  });
  other.join();
  rvgl_emu_get_counters(&after, sizeof after);
  CHECK(rvgl_emu_thread_ioctls() - mine == 3);
  CHECK(theirs == 5);
  CHECK(after.ioctls - before.ioctls == 8);  // process-wide: no other thread of this test calls
}
