// The virtio-gpu transport against the fake render node: which node it opens, what it checks,
// every ioctl's exact arguments, fences and waits, and what happens when an ioctl fails.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "fake_virtgpu.h"
#include "rvgl_virtgpu_transport.h"
#include "support/open_fds.h"
#include "virtgpu_uapi.h"

using namespace rvgl::guest;
using rvgl::guest::test::FakeCapset;
using rvgl::guest::test::FakeNode;
using rvgl::guest::test::FakeVirtgpu;
using rvgl::guest::test::HostBlobRequest;
using rvgl::guest::test::IoctlCall;
using rvgl::guest::test::IoctlFault;
using rvgl::guest::test::UserptrPin;

namespace {

constexpr uint32_t kNrVersion = _IOC_NR(DRM_IOCTL_VERSION);
constexpr uint32_t kNrGemClose = _IOC_NR(DRM_IOCTL_GEM_CLOSE);
constexpr uint32_t kNrMap = DRM_COMMAND_BASE + DRM_VIRTGPU_MAP;
constexpr uint32_t kNrExec = DRM_COMMAND_BASE + DRM_VIRTGPU_EXECBUFFER;
constexpr uint32_t kNrGetParam = DRM_COMMAND_BASE + DRM_VIRTGPU_GETPARAM;
constexpr uint32_t kNrWait = DRM_COMMAND_BASE + DRM_VIRTGPU_WAIT;
constexpr uint32_t kNrGetCaps = DRM_COMMAND_BASE + DRM_VIRTGPU_GET_CAPS;
constexpr uint32_t kNrBlob = DRM_COMMAND_BASE + DRM_VIRTGPU_RESOURCE_CREATE_BLOB;
constexpr uint32_t kNrCtxInit = DRM_COMMAND_BASE + DRM_VIRTGPU_CONTEXT_INIT;

std::vector<uint8_t> caps_bytes(size_t n) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i)
    b[i] = static_cast<uint8_t>(i + 1);
  return b;
}

// Page-aligned anonymous memory for userptr blobs, unmapped at the end.
struct GuestPages {
  size_t size;
  uint8_t *p;
  explicit GuestPages(size_t pages) : size(pages * static_cast<size_t>(sysconf(_SC_PAGESIZE))) {
    p = static_cast<uint8_t *>(
        ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(p != MAP_FAILED);
  }
  ~GuestPages() { ::munmap(p, size); }
  std::span<uint8_t> span() const { return {p, size}; }
};

// A device with capset 8 (version 1, 256 bytes) and an open transport.
struct Fixture {
  FakeVirtgpu dev;
  std::unique_ptr<VirtgpuTransport> t;
  Error open_error;

  explicit Fixture(std::function<void(FakeVirtgpu &)> configure = {}, VirtgpuOptions o = {}) {
    dev.capsets[8] = FakeCapset{1, caps_bytes(256)};
    if (configure) configure(dev);
    o.syscalls = &dev;
    auto r = VirtgpuTransport::open(o);
    if (r)
      t = std::move(*r);
    else
      open_error = r.error();
  }
  void init(uint32_t rings = 64) {
    REQUIRE(t);
    auto s = t->init_context(8, rings);
    INFO(s.error().message);
    REQUIRE(s);
  }
  size_t count(uint32_t nr) const { return dev.calls(nr).size(); }
};

BlobParams host3d(uint32_t flags, uint64_t blob_id, uint64_t size) {
  BlobParams p;
  p.blob_mem = RVGL_BLOB_MEM_HOST3D;
  p.blob_flags = flags;
  p.blob_id = blob_id;
  p.size = size;
  return p;
}

BlobParams userptr(uint32_t blob_mem, uint32_t flags, std::span<uint8_t> memory) {
  BlobParams p;
  p.blob_mem = blob_mem;
  p.blob_flags = flags;
  p.size = memory.size();
  p.guest_memory = memory;
  return p;
}

}  // namespace

TEST_CASE("the render node is the first virtio_gpu one that offers the capset",
          "[guest][virtgpu][open]") {
  SECTION("found by driver name among /dev/dri entries, in minor order") {
    Fixture f([](FakeVirtgpu &d) {
      d.nodes = {FakeNode{"renderD129", "virtio_gpu"}, FakeNode{"renderD128", "amdgpu"}};
    });
    REQUIRE(f.t);
    CHECK(f.t->node_path() == "/dev/dri/renderD129");
    CHECK(f.dev.opened() == std::vector<std::string>{"/dev/dri/renderD128", "/dev/dri/renderD129"});
    CHECK(f.dev.last_open_flags() == (O_RDWR | O_CLOEXEC));
    CHECK(f.dev.open_files() == 1);  // the amdgpu node was closed again
  }
  SECTION("a virtio_gpu node without capset 8 is passed over") {
    Fixture f([](FakeVirtgpu &d) {
      FakeNode venus_only{"renderD128", "virtio_gpu", test::full_virtgpu_params(1u << 4)};
      d.nodes = {venus_only, FakeNode{"renderD129", "virtio_gpu"}};
    });
    REQUIRE(f.t);
    CHECK(f.t->node_path() == "/dev/dri/renderD129");
    CHECK(f.dev.open_files() == 1);
  }
  SECTION("none offers it: the reason of the last one") {
    Fixture f([](FakeVirtgpu &d) {
      d.nodes = {FakeNode{"renderD128", "virtio_gpu", test::full_virtgpu_params(1u << 4)}};
    });
    CHECK(f.open_error.code == -ENOENT);
    CHECK(f.open_error.message.find("capset 8") != std::string::npos);
    CHECK(f.dev.open_files() == 0);
  }
  SECTION("no virtio_gpu node at all") {
    Fixture f([](FakeVirtgpu &d) { d.nodes = {FakeNode{"renderD128", "amdgpu"}}; });
    CHECK(f.open_error.code == -ENODEV);
    CHECK(f.open_error.message.find("amdgpu") != std::string::npos);
    CHECK(f.dev.open_files() == 0);
  }
  SECTION("no /dev/dri") {
    Fixture f([](FakeVirtgpu &d) { d.has_dri_directory = false; });
    CHECK(f.open_error.code == -ENOENT);
  }
  SECTION("an explicit path is the only one tried") {
    VirtgpuOptions o;
    o.node_path = "/dev/dri/renderD130";
    Fixture f(
        [](FakeVirtgpu &d) {
          d.nodes = {FakeNode{"renderD128", "virtio_gpu"}, FakeNode{"renderD130", "virtio_gpu"}};
        },
        o);
    REQUIRE(f.t);
    CHECK(f.dev.opened() == std::vector<std::string>{"/dev/dri/renderD130"});
  }
  SECTION("an explicit path to another driver is refused") {
    VirtgpuOptions o;
    o.node_path = "/dev/dri/renderD128";
    Fixture f([](FakeVirtgpu &d) { d.nodes = {FakeNode{"renderD128", "i915"}}; }, o);
    CHECK(f.open_error.code == -ENODEV);
    CHECK(f.dev.open_files() == 0);
  }
  SECTION("an explicit path that does not exist") {
    VirtgpuOptions o;
    o.node_path = "/dev/dri/renderD200";
    Fixture f({}, o);
    CHECK(f.open_error.code == -ENOENT);
  }
}

TEST_CASE("open reads every parameter and refuses a device that cannot serve",
          "[guest][virtgpu][open]") {
  SECTION("a full device: VERSION, then the six GETPARAMs") {
    Fixture f;
    REQUIRE(f.t);
    auto calls = f.dev.calls();
    REQUIRE(calls.size() == 7);
    CHECK(calls[0].nr == kNrVersion);
    const uint64_t want[] = {1, 3, 4, 5, 6, 7};
    for (size_t i = 0; i < 6; ++i) {
      CHECK(calls[i + 1].request == DRM_IOCTL_VIRTGPU_GETPARAM);
      CHECK(calls[i + 1].arg<drm_virtgpu_getparam>().param == want[i]);
      CHECK(calls[i + 1].arg<drm_virtgpu_getparam>().value != 0);  // where the int goes
    }
    const auto &p = f.t->params();
    CHECK(p.has_3d);
    CHECK(p.resource_blob);
    CHECK(p.host_visible);
    CHECK_FALSE(p.cross_device);
    CHECK(p.context_init);
    CHECK(p.capset_ids == (1u << 8));
  }

  struct Case {
    const char *name;
    uint64_t param;
    int code;
    const char *says;
  };
  const Case cases[] = {
      {"no 3D", VIRTGPU_PARAM_3D_FEATURES, -ENODEV, "3D"},
      {"no blobs", VIRTGPU_PARAM_RESOURCE_BLOB, -ENODEV, "RESOURCE_BLOB"},
      {"no host-visible memory", VIRTGPU_PARAM_HOST_VISIBLE, -ENODEV, "HOST_VISIBLE"},
      {"no context init", VIRTGPU_PARAM_CONTEXT_INIT, -ENODEV, "CONTEXT_INIT"},
      {"no capset 8", VIRTGPU_PARAM_SUPPORTED_CAPSET_IDs, -ENOENT, "capset 8"},
  };
  for (const auto &c : cases) {
    DYNAMIC_SECTION(c.name << ": the feature answers 0") {
      Fixture f([&](FakeVirtgpu &d) { d.nodes[0].params[c.param] = 0; });
      CHECK(f.open_error.code == c.code);
      CHECK(f.open_error.message.find(c.says) != std::string::npos);
      CHECK(f.dev.open_files() == 0);
    }
    DYNAMIC_SECTION(c.name << ": a kernel too old to know it") {
      Fixture f([&](FakeVirtgpu &d) { d.nodes[0].params.erase(c.param); });
      CHECK(f.open_error.code == c.code);
      CHECK(f.dev.open_files() == 0);
    }
  }
  SECTION("capset check off") {
    VirtgpuOptions o;
    o.required_capset_id = 0;
    Fixture f([](FakeVirtgpu &d) { d.nodes[0].params[VIRTGPU_PARAM_SUPPORTED_CAPSET_IDs] = 0; }, o);
    CHECK(f.t);
  }
  SECTION("GETPARAM failing otherwise is an error, not an absent feature") {
    Fixture f([](FakeVirtgpu &d) { d.faults = {IoctlFault{kNrGetParam, 2, -EIO}}; });
    CHECK(f.open_error.code == -EIO);
    CHECK(f.open_error.message.find("RESOURCE_BLOB") != std::string::npos);
    CHECK(f.dev.open_files() == 0);
  }
  SECTION("an interrupted ioctl is repeated") {
    Fixture f([](FakeVirtgpu &d) { d.faults = {IoctlFault{kNrGetParam, 1, -EINTR}}; });
    REQUIRE(f.t);
    CHECK(f.count(kNrGetParam) == 7);
  }
}

TEST_CASE("adopting a render node fd", "[guest][virtgpu][open]") {
  FakeVirtgpu dev;
  dev.nodes = {FakeNode{"renderD128", "virtio_gpu"}, FakeNode{"renderD129", "nouveau"}};
  VirtgpuOptions o;
  o.syscalls = &dev;
  SECTION("a virtio_gpu fd") {
    auto t = VirtgpuTransport::adopt(dev.open("/dev/dri/renderD128", O_RDWR), o);
    REQUIRE(t);
    CHECK((*t)->node_path().empty());
    t->reset();
    CHECK(dev.open_files() == 0);
  }
  SECTION("another driver's fd is refused and closed") {
    auto t = VirtgpuTransport::adopt(dev.open("/dev/dri/renderD129", O_RDWR), o);
    CHECK(t.code() == -ENODEV);
    CHECK(dev.open_files() == 0);
  }
  SECTION("no fd") {
    CHECK(VirtgpuTransport::adopt(-1, o).code() == -EBADF);
  }
}

TEST_CASE("GET_CAPS reads the capset", "[guest][virtgpu][caps]") {
  Fixture f;
  REQUIRE(f.t);
  SECTION("id 8, version 1, the size of a v1 capset") {
    auto caps = f.t->get_capset(8, 1);
    REQUIRE(caps);
    CHECK(*caps == caps_bytes(256));
    auto calls = f.dev.calls(kNrGetCaps);
    REQUIRE(calls.size() == 1);
    auto a = calls[0].arg<drm_virtgpu_get_caps>();
    CHECK(calls[0].request == DRM_IOCTL_VIRTGPU_GET_CAPS);
    CHECK(a.cap_set_id == 8);
    CHECK(a.cap_set_ver == 1);
    CHECK(a.size == sizeof(rvgl_capset));
    CHECK(a.addr != 0);
    CHECK(a.pad == 0);
  }
  SECTION("a shorter host capset leaves the rest zero") {
    f.dev.capsets[8].bytes = caps_bytes(100);
    auto caps = f.t->get_capset(8, 1);
    REQUIRE(caps);
    REQUIRE(caps->size() == 256);
    CHECK(std::vector<uint8_t>(caps->begin(), caps->begin() + 100) == caps_bytes(100));
    CHECK(std::all_of(caps->begin() + 100, caps->end(), [](uint8_t b) { return b == 0; }));
  }
  SECTION("a version above the host's: -ENOENT") {
    CHECK(f.t->get_capset(8, 2).code() == -ENOENT);
  }
  SECTION("an id the device does not list: -ENOENT without asking") {
    CHECK(f.t->get_capset(9, 1).code() == -ENOENT);
    CHECK(f.count(kNrGetCaps) == 0);
  }
  SECTION("a host with no capsets at all (-ENOSYS): -ENOENT") {
    f.dev.capsets.clear();
    CHECK(f.t->get_capset(8, 1).code() == -ENOENT);
  }
  SECTION("other failures pass through") {
    f.dev.faults = {IoctlFault{kNrGetCaps, 1, -EBUSY}};
    auto r = f.t->get_capset(8, 1);
    CHECK(r.code() == -EBUSY);
    CHECK(r.error().message.find("GET_CAPS") != std::string::npos);
  }
}

TEST_CASE("GET_CAPS reads as many bytes as configured", "[guest][virtgpu][caps]") {
  VirtgpuOptions o;
  o.capset_size = 64;
  Fixture f({}, o);
  REQUIRE(f.t);
  auto caps = f.t->get_capset(8, 1);
  REQUIRE(caps);
  CHECK(caps->size() == 64);
  CHECK(f.dev.calls(kNrGetCaps)[0].arg<drm_virtgpu_get_caps>().size == 64);
}

TEST_CASE("CONTEXT_INIT names the capset and the rings", "[guest][virtgpu][context]") {
  using P = rvgl_virtgpu_context_set_param;
  auto params_of = [](const IoctlCall &c) {
    std::vector<std::pair<uint64_t, uint64_t>> v;
    for (const P &p : c.ctx_params)
      v.emplace_back(p.param, p.value);
    return v;
  };
  using PV = std::vector<std::pair<uint64_t, uint64_t>>;

  SECTION("capset 8 and 64 rings") {
    Fixture f;
    f.init(64);
    auto calls = f.dev.calls(kNrCtxInit);
    REQUIRE(calls.size() == 1);
    CHECK(calls[0].request == RVGL_IOCTL_VIRTGPU_CONTEXT_INIT);
    CHECK(calls[0].arg<rvgl_virtgpu_context_init>().num_params == 2);
    CHECK(calls[0].arg<rvgl_virtgpu_context_init>().pad == 0);
    CHECK(params_of(calls[0]) ==
          PV{{VIRTGPU_CONTEXT_PARAM_CAPSET_ID, 8}, {VIRTGPU_CONTEXT_PARAM_NUM_RINGS, 64}});
    CHECK(f.dev.context_capset() == 8);
    CHECK(f.dev.context_rings() == 64);
    CHECK(f.t->context_ready());
    SECTION("once") {
      CHECK(f.t->init_context(8, 64).code() == -EALREADY);
      CHECK(f.count(kNrCtxInit) == 1);
    }
  }
  SECTION("with a poll-rings mask") {
    VirtgpuOptions o;
    o.poll_rings_mask = (1ull << 63) | 2;
    Fixture f({}, o);
    f.init(64);
    CHECK(params_of(f.dev.calls(kNrCtxInit)[0]) ==
          PV{{VIRTGPU_CONTEXT_PARAM_CAPSET_ID, 8},
             {VIRTGPU_CONTEXT_PARAM_NUM_RINGS, 64},
             {VIRTGPU_CONTEXT_PARAM_POLL_RINGS_MASK, (1ull << 63) | 2}});
  }
  SECTION("no rings: no NUM_RINGS, and ring submits are refused") {
    Fixture f;
    f.init(0);
    CHECK(params_of(f.dev.calls(kNrCtxInit)[0]) == PV{{VIRTGPU_CONTEXT_PARAM_CAPSET_ID, 8}});
    SubmitParams sp;
    sp.ring_idx = 0;
    CHECK(f.t->submit(sp).code() == -EINVAL);
    CHECK(f.count(kNrExec) == 0);
  }
  SECTION("refused before the ioctl") {
    Fixture f;
    REQUIRE(f.t);
    CHECK(f.t->init_context(8, 65).code() == -EINVAL);
    CHECK(f.t->init_context(0, 64).code() == -EINVAL);
    CHECK(f.t->init_context(64, 64).code() == -EINVAL);
    CHECK(f.t->init_context(9, 64).code() == -ENOENT);  // not in SUPPORTED_CAPSET_IDs
    CHECK(f.count(kNrCtxInit) == 0);
    CHECK_FALSE(f.t->context_ready());
  }
  SECTION("a poll mask past the rings") {
    VirtgpuOptions o;
    o.poll_rings_mask = 1ull << 8;
    Fixture f({}, o);
    REQUIRE(f.t);
    CHECK(f.t->init_context(8, 8).code() == -EINVAL);
    CHECK(f.count(kNrCtxInit) == 0);
  }
  SECTION("the kernel refuses") {
    Fixture f([](FakeVirtgpu &d) { d.faults = {IoctlFault{kNrCtxInit, 1, -EEXIST}}; });
    REQUIRE(f.t);
    auto s = f.t->init_context(8, 64);
    CHECK(s.code() == -EEXIST);
    CHECK_FALSE(f.t->context_ready());
  }
}

TEST_CASE("nothing is created or submitted before the context", "[guest][virtgpu][context]") {
  Fixture f;
  REQUIRE(f.t);
  CHECK(f.t->create_blob(host3d(RVGL_BLOB_FLAG_USE_MAPPABLE, 0, 65536)).code() == -EINVAL);
  CHECK(f.t->submit(SubmitParams{}).code() == -EINVAL);
  CHECK(f.count(kNrBlob) == 0);
  CHECK(f.count(kNrExec) == 0);
  CHECK(f.dev.context_capset() == 0);
}

TEST_CASE("HOST3D blobs: the shared page, claims, and their mappings", "[guest][virtgpu][blob]") {
  UniqueFd host_memfd;
  Fixture f([&](FakeVirtgpu &d) {
    d.on_host_blob = [&](const HostBlobRequest &b, UniqueFd &memory) {
      memory.reset(memfd_create("host", MFD_CLOEXEC));
      if (ftruncate(memory.get(), static_cast<off_t>(b.size)) != 0) return -ENOMEM;
      if (b.blob_id == 0) host_memfd.reset(dup(memory.get()));
      return 0;
    };
  });
  f.init();

  SECTION("the shared page: HOST3D, exactly MAPPABLE, blob_id 0, then MAP and mmap") {
    auto b = f.t->create_blob(host3d(RVGL_BLOB_FLAG_USE_MAPPABLE, 0, RVGL_SHMEM_SIZE));
    REQUIRE(b);
    auto calls = f.dev.calls(kNrBlob);
    REQUIRE(calls.size() == 1);
    CHECK(calls[0].request == RVGL_IOCTL_VIRTGPU_RESOURCE_CREATE_BLOB);  // the upstream 48 bytes
    auto a = calls[0].arg<rvgl_virtgpu_resource_create_blob>();
    CHECK(a.blob_mem == VIRTGPU_BLOB_MEM_HOST3D);
    CHECK(a.blob_flags == VIRTGPU_BLOB_FLAG_USE_MAPPABLE);
    CHECK(a.size == RVGL_SHMEM_SIZE);
    CHECK(a.blob_id == 0);
    CHECK(a.bo_handle == 0);
    CHECK(a.res_handle == 0);
    CHECK(a.pad == 0);
    CHECK(a.cmd_size == 0);
    CHECK(a.cmd == 0);
    CHECK(b->res_id == 1);
    CHECK(b->handle == 1);
    CHECK(b->size == RVGL_SHMEM_SIZE);
    CHECK(b->memory.empty());
    CHECK_FALSE(b->fd.valid());

    REQUIRE(f.t->map_blob(*b));
    auto maps = f.dev.calls(kNrMap);
    REQUIRE(maps.size() == 1);
    CHECK(maps[0].request == DRM_IOCTL_VIRTGPU_MAP);
    CHECK(maps[0].arg<drm_virtgpu_map>().handle == b->handle);
    REQUIRE(b->memory.size() == RVGL_SHMEM_SIZE);
    CHECK_FALSE(b->mapping.valid());  // the transport owns it
    CHECK(f.dev.live_mappings() == 1);

    // The same memory as the host's.
    auto host = Mapping::map_shared(host_memfd.get(), RVGL_SHMEM_SIZE);
    REQUIRE(host);
    host->data()[123] = 0x5a;
    CHECK(b->memory[123] == 0x5a);
    b->memory[456] = 0xa5;
    CHECK(host->data()[456] == 0xa5);

    SECTION("mapping twice is one mapping") {
      REQUIRE(f.t->map_blob(*b));
      CHECK(f.dev.live_mappings() == 1);
      CHECK(f.count(kNrMap) == 1);
    }
  }
  SECTION("a claim: the blob_id of a BO_CREATE, any flags") {
    auto b = f.t->create_blob(host3d(RVGL_BLOB_FLAG_USE_SHAREABLE, 42, 8192));
    REQUIRE(b);
    auto a = f.dev.calls(kNrBlob)[0].arg<rvgl_virtgpu_resource_create_blob>();
    CHECK(a.blob_mem == VIRTGPU_BLOB_MEM_HOST3D);
    CHECK(a.blob_flags == VIRTGPU_BLOB_FLAG_USE_SHAREABLE);
    CHECK(a.blob_id == 42);
    CHECK(a.size == 8192);
    auto hb = f.dev.host_blobs();
    REQUIRE(hb.size() == 1);
    CHECK(hb[0].blob_id == 42);
    SECTION("not MAPPABLE: map_blob refuses without asking") {
      CHECK(f.t->map_blob(*b).code() == -EINVAL);
      CHECK(f.count(kNrMap) == 0);
    }
  }
  SECTION("the host refuses the blob") {
    f.dev.on_host_blob = [](const HostBlobRequest &, UniqueFd &) { return -ENOSPC; };
    auto b = f.t->create_blob(host3d(RVGL_BLOB_FLAG_USE_MAPPABLE, 7, 4096));
    CHECK(b.code() == -ENOSPC);
    CHECK(b.error().message.find("RESOURCE_CREATE_BLOB") != std::string::npos);
  }
  SECTION("unknown blob_mem and size 0 are refused locally") {
    BlobParams p = host3d(0, 0, 4096);
    p.blob_mem = 4;
    CHECK(f.t->create_blob(p).code() == -EINVAL);
    CHECK(f.t->create_blob(host3d(0, 0, 0)).code() == -EINVAL);
    CHECK(f.count(kNrBlob) == 0);
  }
  SECTION("host memory given for a host blob") {
    GuestPages pages(1);
    BlobParams p = host3d(RVGL_BLOB_FLAG_USE_MAPPABLE, 0, pages.size);
    p.guest_memory = pages.span();
    CHECK(f.t->create_blob(p).code() == -EINVAL);
    CHECK(f.count(kNrBlob) == 0);
  }
}

TEST_CASE("userptr blobs carry the address and the flags of the userptr series",
          "[guest][virtgpu][blob][userptr]") {
  std::vector<UserptrPin> pins;
  Fixture f([&](FakeVirtgpu &d) {
    d.on_userptr = [&](const UserptrPin &p) {
      pins.push_back(p);
      p.addr[0] = 0x77;  // the host writes straight into the guest's pages
    };
  });
  f.init();
  GuestPages pages(4);

  struct Case {
    const char *name;
    uint32_t blob_mem;
    uint32_t flags;
  };
  const Case cases[] = {
      {"GUEST, USERPTR", RVGL_BLOB_MEM_GUEST, RVGL_BLOB_FLAG_USERPTR},
      {"GUEST, USERPTR | RDONLY", RVGL_BLOB_MEM_GUEST,
       RVGL_BLOB_FLAG_USERPTR | RVGL_BLOB_FLAG_USERPTR_RDONLY},
      {"GUEST, RDONLY alone", RVGL_BLOB_MEM_GUEST, RVGL_BLOB_FLAG_USERPTR_RDONLY},
      {"HOST3D_GUEST, USERPTR", RVGL_BLOB_MEM_HOST3D_GUEST, RVGL_BLOB_FLAG_USERPTR},
      {"HOST3D_GUEST, USERPTR | SHAREABLE", RVGL_BLOB_MEM_HOST3D_GUEST,
       RVGL_BLOB_FLAG_USERPTR | RVGL_BLOB_FLAG_USE_SHAREABLE},
  };
  for (const auto &c : cases) {
    DYNAMIC_SECTION(c.name) {
      auto b = f.t->create_blob(userptr(c.blob_mem, c.flags, pages.span()));
      INFO((b ? std::string() : b.error().message));
      REQUIRE(b);
      auto calls = f.dev.calls(kNrBlob);
      REQUIRE(calls.size() == 1);
      CHECK(calls[0].request == RVGL_IOCTL_VIRTGPU_RESOURCE_CREATE_BLOB_USERPTR);  // 56 bytes
      auto a = calls[0].arg<rvgl_virtgpu_resource_create_blob_userptr>();
      CHECK(a.base.blob_mem == c.blob_mem);
      CHECK(a.base.blob_flags == c.flags);
      CHECK(a.base.size == pages.size);
      CHECK(a.base.blob_id == 0);
      CHECK(a.base.cmd_size == 0);
      CHECK(a.userptr == reinterpret_cast<uintptr_t>(pages.p));
      REQUIRE(pins.size() == 1);
      CHECK(pins[0].addr == pages.p);
      CHECK(pins[0].size == pages.size);
      CHECK(pins[0].blob_flags == c.flags);
      CHECK(pins[0].res_id == b->res_id);
      // In place: the blob's memory is the guest's own, and the host's write is there.
      CHECK(b->memory.data() == pages.p);
      CHECK(b->memory.size() == pages.size);
      CHECK(pages.p[0] == 0x77);
      // Nothing to map.
      REQUIRE(f.t->map_blob(*b));
      CHECK(f.count(kNrMap) == 0);
      REQUIRE(f.t->unref_blob(std::move(*b)));
      CHECK(f.dev.unrefs() == std::vector<uint32_t>{pins[0].res_id});
    }
  }
}

TEST_CASE("userptr blobs the kernel could not pin as asked are refused locally",
          "[guest][virtgpu][blob][userptr]") {
  Fixture f;
  f.init();
  GuestPages pages(2);
  const size_t page = pages.size / 2;

  SECTION("an unaligned address") {
    auto p = userptr(RVGL_BLOB_MEM_GUEST, RVGL_BLOB_FLAG_USERPTR, {pages.p + 64, page});
    CHECK(f.t->create_blob(p).code() == -EINVAL);
  }
  SECTION("a size that is not whole pages") {
    auto p = userptr(RVGL_BLOB_MEM_GUEST, RVGL_BLOB_FLAG_USERPTR, {pages.p, page + 8});
    CHECK(f.t->create_blob(p).code() == -EINVAL);
  }
  SECTION("memory shorter than the blob: the kernel would pin pages not handed over") {
    auto p = userptr(RVGL_BLOB_MEM_GUEST, RVGL_BLOB_FLAG_USERPTR, {pages.p, page});
    p.size = 2 * page;
    CHECK(f.t->create_blob(p).code() == -EINVAL);
  }
  SECTION("a userptr flag without memory") {
    BlobParams p;
    p.blob_mem = RVGL_BLOB_MEM_GUEST;
    p.blob_flags = RVGL_BLOB_FLAG_USERPTR;
    p.size = page;
    CHECK(f.t->create_blob(p).code() == -EINVAL);
  }
  SECTION("a userptr on a HOST3D blob") {
    auto p = userptr(RVGL_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USERPTR, pages.span());
    CHECK(f.t->create_blob(p).code() == -EINVAL);
  }
  SECTION("guest memory without a userptr flag") {
    auto p = userptr(RVGL_BLOB_MEM_GUEST, 0, pages.span());
    auto r = f.t->create_blob(p);
    CHECK(r.code() == -EINVAL);
    CHECK(r.error().message.find("USERPTR") != std::string::npos);
  }
  CHECK(f.count(kNrBlob) == 0);
}

TEST_CASE("a guest kernel without the userptr series refuses userptr blobs",
          "[guest][virtgpu][blob][userptr]") {
  Fixture f([](FakeVirtgpu &d) { d.userptr_supported = false; });
  f.init();
  GuestPages pages(1);
  auto r = f.t->create_blob(userptr(RVGL_BLOB_MEM_GUEST, RVGL_BLOB_FLAG_USERPTR, pages.span()));
  CHECK(r.code() == -EINVAL);
  CHECK(r.error().message.find("userptr series") != std::string::npos);
  // Every other blob is the upstream ioctl and still works.
  CHECK(f.t->create_blob(host3d(RVGL_BLOB_FLAG_USE_MAPPABLE, 0, 65536)));
}

TEST_CASE("GUEST blobs without userptr are the kernel's pages, mappable",
          "[guest][virtgpu][blob]") {
  Fixture f;
  f.init();
  BlobParams p;
  p.blob_mem = RVGL_BLOB_MEM_GUEST;
  p.blob_flags = RVGL_BLOB_FLAG_USE_MAPPABLE;
  p.size = 8192;
  auto b = f.t->create_blob(p);
  REQUIRE(b);
  CHECK(f.dev.calls(kNrBlob)[0].request == RVGL_IOCTL_VIRTGPU_RESOURCE_CREATE_BLOB);
  REQUIRE(f.t->map_blob(*b));
  CHECK(b->memory.size() == 8192);
  b->memory[8191] = 1;
  SECTION("with a blob_id the kernel refuses it (GUEST blobs have none)") {
    p.blob_id = 3;
    CHECK(f.t->create_blob(p).code() == -EINVAL);
  }
}

TEST_CASE("unref_blob unmaps, then closes the GEM handle", "[guest][virtgpu][blob]") {
  Fixture f;
  f.init();
  auto b = f.t->create_blob(host3d(RVGL_BLOB_FLAG_USE_MAPPABLE, 0, 65536));
  REQUIRE(b);
  REQUIRE(f.t->map_blob(*b));
  const uint32_t handle = b->handle, res = b->res_id;
  SECTION("both go") {
    REQUIRE(f.t->unref_blob(std::move(*b)));
    auto closes = f.dev.calls(kNrGemClose);
    REQUIRE(closes.size() == 1);
    CHECK(closes[0].request == DRM_IOCTL_GEM_CLOSE);
    CHECK(closes[0].arg<drm_gem_close>().handle == handle);
    CHECK(f.dev.live_mappings() == 0);
    CHECK(f.dev.live_handles() == 0);
    // The resource went at GEM_CLOSE: no mapping was left holding it.
    CHECK(f.dev.unrefs() == std::vector<uint32_t>{res});
  }
  SECTION("GEM_CLOSE fails: the error, and the mapping is gone all the same") {
    f.dev.faults = {IoctlFault{kNrGemClose, 1, -EINVAL}};
    auto s = f.t->unref_blob(std::move(*b));
    CHECK(s.code() == -EINVAL);
    CHECK(s.error().message.find("GEM_CLOSE") != std::string::npos);
    CHECK(f.dev.live_mappings() == 0);
  }
  SECTION("a blob without a handle") {
    CHECK(f.t->unref_blob(Blob{}).code() == -EINVAL);
  }
}

TEST_CASE("EXECBUFFER: ring index, out-fence and the commands", "[guest][virtgpu][submit]") {
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> host_saw;
  Fixture f([&](FakeVirtgpu &d) {
    d.on_execbuffer = [&](uint32_t ring, bool given, std::span<const uint8_t> cmds) {
      host_saw.push_back({given ? ring : ~0u, {cmds.begin(), cmds.end()}});
    };
  });
  f.init();
  const std::vector<uint8_t> cmds = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

  SECTION("ring 0 with a fence") {
    SubmitParams sp;
    sp.commands = cmds;
    sp.ring_idx = RVGL_RING_CPU;
    auto fence = f.t->submit(sp);
    REQUIRE(fence);
    auto calls = f.dev.calls(kNrExec);
    REQUIRE(calls.size() == 1);
    CHECK(calls[0].request == RVGL_IOCTL_VIRTGPU_EXECBUFFER);
    auto a = calls[0].arg<rvgl_virtgpu_execbuffer>();
    CHECK(a.flags == (VIRTGPU_EXECBUF_RING_IDX | VIRTGPU_EXECBUF_FENCE_FD_OUT));
    CHECK(a.size == 16);
    CHECK(a.command == reinterpret_cast<uintptr_t>(cmds.data()));
    CHECK(a.num_bo_handles == 0);
    CHECK(a.bo_handles == 0);
    CHECK(a.fence_fd == -1);
    CHECK(a.ring_idx == 0);
    CHECK(a.syncobj_stride == 0);
    CHECK(a.num_in_syncobjs == 0);
    CHECK(a.num_out_syncobjs == 0);
    CHECK(calls[0].commands == cmds);
    REQUIRE(host_saw.size() == 1);
    CHECK(host_saw[0].first == 0);
    CHECK(host_saw[0].second == cmds);
    // The fence is the sync_file the kernel returned.
    REQUIRE(fence->fd.valid());
    CHECK(fence->valid());
    auto w = f.t->wait(*fence, std::chrono::seconds(1));
    REQUIRE(w);
    CHECK(*w);
  }
  SECTION("a queue ring without a fence") {
    SubmitParams sp;
    sp.commands = cmds;
    sp.ring_idx = 5;
    sp.want_fence = false;
    auto fence = f.t->submit(sp);
    REQUIRE(fence);
    CHECK_FALSE(fence->valid());
    auto a = f.dev.calls(kNrExec)[0].arg<rvgl_virtgpu_execbuffer>();
    CHECK(a.flags == VIRTGPU_EXECBUF_RING_IDX);
    CHECK(a.ring_idx == 5);
    CHECK(f.t->wait(*fence, std::chrono::milliseconds(1)).code() == -EINVAL);
  }
  SECTION("no ring index: the fence is the device's global one") {
    SubmitParams sp;
    sp.commands = cmds;
    auto fence = f.t->submit(sp);
    REQUIRE(fence);
    auto a = f.dev.calls(kNrExec)[0].arg<rvgl_virtgpu_execbuffer>();
    CHECK(a.flags == VIRTGPU_EXECBUF_FENCE_FD_OUT);
    CHECK(a.ring_idx == 0);
    CHECK(fence->fd.valid());
  }
  SECTION("an empty command buffer (a fence-only submit) on the events ring") {
    SubmitParams sp;
    sp.ring_idx = RVGL_RING_EVENTS;
    auto fence = f.t->submit(sp);
    REQUIRE(fence);
    auto a = f.dev.calls(kNrExec)[0].arg<rvgl_virtgpu_execbuffer>();
    CHECK(a.size == 0);
    CHECK(a.ring_idx == 63);
  }
  SECTION("refused locally: a ring past the context's, a buffer of part dwords") {
    SubmitParams sp;
    sp.commands = cmds;
    sp.ring_idx = 64;
    CHECK(f.t->submit(sp).code() == -EINVAL);
    sp.ring_idx = 0;
    sp.commands = std::span<const uint8_t>(cmds.data(), 6);
    CHECK(f.t->submit(sp).code() == -EINVAL);
    CHECK(f.count(kNrExec) == 0);
  }
  SECTION("the kernel refuses") {
    f.dev.faults = {IoctlFault{kNrExec, 1, -ENOMEM}};
    SubmitParams sp;
    sp.commands = cmds;
    sp.ring_idx = 0;
    const size_t fds = rvgl::test::open_fd_count();
    auto r = f.t->submit(sp);
    CHECK(r.code() == -ENOMEM);
    CHECK(r.error().message.find("EXECBUFFER") != std::string::npos);
    CHECK(rvgl::test::open_fd_count() == fds);
  }
}

TEST_CASE("waits poll the fence fd, with a bound", "[guest][virtgpu][wait]") {
  Fixture f([](FakeVirtgpu &d) { d.hold_rings = 1ull << 3; });
  f.init();
  SubmitParams sp;
  sp.ring_idx = 3;
  auto fence = f.t->submit(sp);
  REQUIRE(fence);
  REQUIRE(f.dev.pending_fences() == 1);

  SECTION("not yet: false after the timeout") {
    const auto t0 = std::chrono::steady_clock::now();
    auto w = f.t->wait(*fence, std::chrono::milliseconds(60));
    REQUIRE(w);
    CHECK_FALSE(*w);
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(55));
    auto now = f.t->wait(*fence, std::chrono::milliseconds(0));
    REQUIRE(now);
    CHECK_FALSE(*now);
  }
  SECTION("signalled while waiting forever") {
    std::thread host([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
      f.dev.release_fences();
    });
    auto w = f.t->wait(*fence, kWaitForever);
    host.join();
    REQUIRE(w);
    CHECK(*w);
  }
  SECTION("a fence that is not virtio-gpu's") {
    Fence vtest_like;
    vtest_like.id = 3;
    CHECK(f.t->wait(vtest_like, std::chrono::milliseconds(1)).code() == -EINVAL);
  }
}

TEST_CASE("WAIT: a blob is idle once the fences of submits naming it signal",
          "[guest][virtgpu][wait]") {
  Fixture f([](FakeVirtgpu &d) {
    d.hold_rings = 1ull << 2;
    d.wait_bound = std::chrono::milliseconds(50);
  });
  f.init();
  auto b = f.t->create_blob(host3d(RVGL_BLOB_FLAG_USE_MAPPABLE, 5, 4096));
  REQUIRE(b);
  auto idle = f.t->wait_idle(*b, false);
  REQUIRE(idle);
  CHECK(*idle);

  SubmitParams sp;
  sp.ring_idx = 2;
  sp.want_fence = false;
  const uint32_t handles[] = {b->handle};
  REQUIRE(f.t->submit(sp, handles));
  auto exec = f.dev.calls(kNrExec).back();
  CHECK(exec.arg<rvgl_virtgpu_execbuffer>().num_bo_handles == 1);
  CHECK(exec.bo_handles == std::vector<uint32_t>{b->handle});

  auto busy = f.t->wait_idle(*b, false);
  REQUIRE(busy);
  CHECK_FALSE(*busy);
  auto waits = f.dev.calls(kNrWait);
  CHECK(waits.back().request == DRM_IOCTL_VIRTGPU_WAIT);
  CHECK(waits.back().arg<drm_virtgpu_3d_wait>().handle == b->handle);
  CHECK(waits.back().arg<drm_virtgpu_3d_wait>().flags == VIRTGPU_WAIT_NOWAIT);

  auto still = f.t->wait_idle(*b, true);  // the kernel's bounded wait runs out
  REQUIRE(still);
  CHECK_FALSE(*still);
  CHECK(f.dev.calls(kNrWait).back().arg<drm_virtgpu_3d_wait>().flags == 0);

  std::thread host([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    f.dev.release_fences();
  });
  auto done = f.t->wait_idle(*b, true);
  host.join();
  REQUIRE(done);
  CHECK(*done);

  SECTION("an unknown handle") {
    Blob other;
    other.handle = 99;
    CHECK(f.t->wait_idle(other, false).code() == -ENOENT);
  }
  SECTION("submitting with an unknown handle") {
    const uint32_t bad[] = {99};
    CHECK(f.t->submit(sp, bad).code() == -ENOENT);
  }
}

TEST_CASE("POLL_RINGS_MASK: fence events are read off the render node", "[guest][virtgpu][wait]") {
  VirtgpuOptions o;
  o.poll_rings_mask = 1ull << 1;
  Fixture f({}, o);
  f.init();
  auto none = f.t->read_fence_events();
  REQUIRE(none);
  CHECK(*none == 0);
  SubmitParams sp;
  sp.ring_idx = 1;
  sp.want_fence = false;  // the event is the fence
  REQUIRE(f.t->submit(sp));
  REQUIRE(f.t->submit(sp));
  sp.ring_idx = 2;  // not polled
  REQUIRE(f.t->submit(sp));
  pollfd pfd{f.t->event_fd(), POLLIN, 0};
  CHECK(f.dev.poll(&pfd, 1, 0) == 1);
  auto two = f.t->read_fence_events();
  REQUIRE(two);
  CHECK(*two == 2);
  auto again = f.t->read_fence_events();
  REQUIRE(again);
  CHECK(*again == 0);
}

TEST_CASE("ioctl failures are clean errors and leak nothing", "[guest][virtgpu][errors]") {
  const size_t fds_before = rvgl::test::open_fd_count();
  {
    Fixture f;
    f.init();
    GuestPages pages(1);

    SECTION("MAP") {
      auto b = f.t->create_blob(host3d(RVGL_BLOB_FLAG_USE_MAPPABLE, 0, 65536));
      REQUIRE(b);
      f.dev.faults = {IoctlFault{kNrMap, 1, -ENOMEM}};
      auto s = f.t->map_blob(*b);
      CHECK(s.code() == -ENOMEM);
      CHECK(s.error().message.find("MAP") != std::string::npos);
      CHECK(b->memory.empty());
      SECTION("and mapping again works") {
        REQUIRE(f.t->map_blob(*b));
        CHECK(f.dev.live_mappings() == 1);
      }
    }
    SECTION("mmap") {
      auto b = f.t->create_blob(host3d(RVGL_BLOB_FLAG_USE_MAPPABLE, 0, 65536));
      REQUIRE(b);
      f.dev.mmap_error = -ENOMEM;
      auto s = f.t->map_blob(*b);
      CHECK(s.code() == -ENOMEM);
      CHECK(s.error().message.find("mmap") != std::string::npos);
      CHECK(f.dev.live_mappings() == 0);
    }
    SECTION("RESOURCE_CREATE_BLOB") {
      f.dev.faults = {IoctlFault{kNrBlob, 1, -ENOSPC}};
      CHECK(f.t->create_blob(host3d(RVGL_BLOB_FLAG_USE_MAPPABLE, 0, 65536)).code() == -ENOSPC);
      f.dev.faults = {IoctlFault{kNrBlob, 2, -EFAULT}};
      CHECK(f.t->create_blob(userptr(RVGL_BLOB_MEM_GUEST, RVGL_BLOB_FLAG_USERPTR, pages.span()))
                .code() == -EFAULT);
      CHECK(f.dev.live_handles() == 0);
    }
    SECTION("EXECBUFFER, and the submits after it") {
      f.dev.faults = {IoctlFault{kNrExec, 1, -EIO}};
      SubmitParams sp;
      sp.ring_idx = 0;
      CHECK(f.t->submit(sp).code() == -EIO);
      auto fence = f.t->submit(sp);
      REQUIRE(fence);
      CHECK(*f.t->wait(*fence, std::chrono::seconds(1)));
    }
    // Whatever is left is the transport's to clean up.
    auto b = f.t->create_blob(host3d(RVGL_BLOB_FLAG_USE_MAPPABLE, 0, 65536));
    REQUIRE(b);
    REQUIRE(f.t->map_blob(*b));
    f.t.reset();
    CHECK(f.dev.open_files() == 0);
    CHECK(f.dev.live_mappings() == 0);
    CHECK(f.dev.live_handles() == 0);
  }
  CHECK(rvgl::test::open_fd_count() == fds_before);
}
