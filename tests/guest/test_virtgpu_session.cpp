// The session end to end over the virtio-gpu transport: the fake render node stands for the guest
// kernel, and behind it the host's own FrameDecoder answers into the shared page the node maps.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>

#include "fake_rocm_host.h"
#include "fake_virtgpu.h"
#include "session_scenarios.h"
#include "rvgl_session.h"
#include "rvgl_virtgpu_transport.h"

using namespace rvgl::guest;
using rvgl::guest::test::bytes_of;
using rvgl::guest::test::check_event_wakes_waiter;
using rvgl::guest::test::check_slots_reused_only_after_responses;
using rvgl::guest::test::fake_host_capset;
using rvgl::guest::test::FakeCapset;
using rvgl::guest::test::FakeRocmHost;
using rvgl::guest::test::FakeVirtgpu;
using rvgl::guest::test::HostBlobRequest;

namespace {

constexpr uint32_t kNrGemClose = _IOC_NR(DRM_IOCTL_GEM_CLOSE);
constexpr uint32_t kNrMap = DRM_COMMAND_BASE + DRM_VIRTGPU_MAP;
constexpr uint32_t kNrExec = DRM_COMMAND_BASE + DRM_VIRTGPU_EXECBUFFER;
constexpr uint32_t kNrGetCaps = DRM_COMMAND_BASE + DRM_VIRTGPU_GET_CAPS;
constexpr uint32_t kNrBlob = DRM_COMMAND_BASE + DRM_VIRTGPU_RESOURCE_CREATE_BLOB;
constexpr uint32_t kNrCtxInit = DRM_COMMAND_BASE + DRM_VIRTGPU_CONTEXT_INIT;

rvgl_capset host_capset() {
  return fake_host_capset(RVGL_FEATURE_USERPTR | RVGL_FEATURE_EVENT_RING, "virtio host");
}

// The shared fake host, behind the fake node: it counts the CPU ring's submissions.
struct RocmHost : FakeRocmHost {
  int ring0_submits = 0;

  RocmHost() : FakeRocmHost(5000000, 11) {}

  int make_blob(const HostBlobRequest &b, UniqueFd &memory) {
    return make_shared_page(b.blob_id, b.blob_flags, b.size, &memory);
  }

  void run(uint32_t ring, bool given, std::span<const uint8_t> commands) {
    if (given && ring == RVGL_RING_CPU) {
      ++ring0_submits;
      decode(commands);
    }
  }
};

struct Fixture {
  RocmHost host;
  FakeVirtgpu dev;
  std::unique_ptr<Session> session;
  Error open_error;

  explicit Fixture(std::function<void(Fixture &)> configure = {}, SessionOptions so = {},
                   VirtgpuOptions vo = {}) {
    dev.capsets[RVGL_CAPSET_ID] = FakeCapset{RVGL_CAPSET_VERSION, bytes_of(host_capset())};
    dev.on_host_blob = [this](const HostBlobRequest &b, UniqueFd &m) {
      return host.make_blob(b, m);
    };
    dev.on_execbuffer = [this](uint32_t ring, bool given, std::span<const uint8_t> c) {
      host.run(ring, given, c);
    };
    if (configure) configure(*this);
    vo.syscalls = &dev;
    auto t = VirtgpuTransport::open(vo);
    if (!t) {
      open_error = t.error();
      return;
    }
    auto s = Session::open(std::move(*t), so);
    if (s)
      session = std::move(*s);
    else
      open_error = s.error();
  }
};

}  // namespace

TEST_CASE("Session::open over virtio-gpu: capset, context, shared page",
          "[guest][virtgpu][session]") {
  Fixture f;
  INFO(f.open_error.message);
  REQUIRE(f.session);
  CHECK(std::string(f.session->capset().marketing_name) == "virtio host");
  CHECK(std::string(f.session->transport().name()) == "virtio-gpu");

  // The order of the uAPI calls: capset, context, shared page blob, its mapping.
  std::vector<uint32_t> order;
  for (const auto &c : f.dev.calls())
    if (c.nr >= DRM_COMMAND_BASE && c.nr != DRM_COMMAND_BASE + DRM_VIRTGPU_GETPARAM)
      order.push_back(c.nr);
  CHECK(order == std::vector<uint32_t>{kNrGetCaps, kNrCtxInit, kNrBlob, kNrMap});
  CHECK(f.dev.context_capset() == RVGL_CAPSET_ID);
  CHECK(f.dev.context_rings() == RVGL_RING_COUNT);
  auto blob = f.dev.calls(kNrBlob)[0].arg<rvgl_virtgpu_resource_create_blob>();
  CHECK(blob.blob_mem == VIRTGPU_BLOB_MEM_HOST3D);
  CHECK(blob.blob_flags == VIRTGPU_BLOB_FLAG_USE_MAPPABLE);
  CHECK(blob.blob_id == 0);
  CHECK(blob.size == RVGL_SHMEM_SIZE);
  CHECK(f.session->shared_page().validate_layout().ok());

  auto bo = f.session->call<rvgl_rsp_bo_create>(
      [](RequestEncoder &e) { return e.bo_create({.size = 4096, .domain = RVGL_DOMAIN_GTT}); });
  REQUIRE(bo);
  CHECK(bo->bo == 11);
  auto bad = f.session->call<rvgl_rsp_bo_create>(
      [](RequestEncoder &e) { return e.bo_create({.size = 0}); });
  CHECK(bad.code() == -EINVAL);
  CHECK(f.host.ring0_submits == 2);

  // Requests go out on ring 0 with an out-fence.
  auto exec = f.dev.calls(kNrExec).back().arg<rvgl_virtgpu_execbuffer>();
  CHECK(exec.flags == (VIRTGPU_EXECBUF_RING_IDX | VIRTGPU_EXECBUF_FENCE_FD_OUT));
  CHECK(exec.ring_idx == RVGL_RING_CPU);

  f.session.reset();  // unmaps and closes the shared page, then the node
  CHECK(f.dev.calls(kNrGemClose).size() == 1);
  CHECK(f.dev.unrefs() == std::vector<uint32_t>{1});
  CHECK(f.dev.live_mappings() == 0);
  CHECK(f.dev.open_files() == 0);
}

TEST_CASE("over virtio-gpu, response slots are reused only after their responses",
          "[guest][virtgpu][session]") {
  Fixture f;
  REQUIRE(f.session);
  check_slots_reused_only_after_responses(*f.session, 5000000);
}

TEST_CASE("over virtio-gpu, hosts a session cannot use are refused with a reason",
          "[guest][virtgpu][session]") {
  SECTION("the device lists no capset 8") {
    Fixture f(
        [](Fixture &x) { x.dev.nodes[0].params[VIRTGPU_PARAM_SUPPORTED_CAPSET_IDs] = 1u << 4; });
    CHECK(f.open_error.code == -ENOENT);
  }
  SECTION("it lists it, but the host has no such capset") {
    Fixture f([](Fixture &x) { x.dev.capsets.erase(RVGL_CAPSET_ID); });
    CHECK(f.open_error.code == -ENOENT);
  }
  SECTION("another wire format") {
    Fixture f([](Fixture &x) {
      auto c = host_capset();
      c.wire_format_version = 9;
      x.dev.capsets[RVGL_CAPSET_ID].bytes = bytes_of(c);
    });
    CHECK(f.open_error.code == -EPROTONOSUPPORT);
  }
  SECTION("no blob support") {
    Fixture f([](Fixture &x) { x.dev.nodes[0].params[VIRTGPU_PARAM_RESOURCE_BLOB] = 0; });
    CHECK(f.open_error.code == -ENODEV);
  }
  SECTION("the host refuses the shared page") {
    Fixture f([](Fixture &x) {
      x.dev.on_host_blob = [](const HostBlobRequest &, UniqueFd &) { return -ENOMEM; };
    });
    CHECK(f.open_error.code == -ENOMEM);
    CHECK(f.dev.open_files() == 0);
  }
  SECTION("a shared page without its layout") {
    Fixture f([](Fixture &x) { x.host.init_header = false; });
    CHECK(f.open_error.code == -EPROTO);
    CHECK(f.dev.open_files() == 0);
    CHECK(f.dev.live_mappings() == 0);
  }
}

TEST_CASE("over virtio-gpu, events are waited for on the events ring",
          "[guest][virtgpu][session]") {
  Fixture f([](Fixture &x) { x.dev.hold_rings = 1ull << RVGL_RING_EVENTS; });
  REQUIRE(f.session);
  check_event_wakes_waiter(*f.session, [&] {
    f.host.push_event(RVGL_EVENT_QUEUE_RESET);
    f.dev.release_fences();  // ring 63 retires when a record is unread
  });
  auto exec = f.dev.calls(kNrExec).back();
  CHECK(exec.arg<rvgl_virtgpu_execbuffer>().ring_idx == RVGL_RING_EVENTS);
  CHECK(exec.commands.empty());
}
