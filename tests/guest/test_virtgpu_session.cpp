// The session end to end over the virtio-gpu transport: the fake render node stands for the guest
// kernel, and behind it the host's own FrameDecoder answers into the shared page the node maps.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "context/command_layouts.h"
#include "context/frame_decoder.h"
#include "context/shmem_view.h"
#include "fake_virtgpu.h"
#include "rvgl_session.h"
#include "rvgl_virtgpu_transport.h"

using namespace rvgl::guest;
using rvgl::guest::test::FakeCapset;
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
  rvgl_capset c{};
  c.wire_format_version = RVGL_WIRE_FORMAT_VERSION;
  c.protocol_major = RVGL_PROTOCOL_MAJOR;
  c.shmem_size = RVGL_SHMEM_SIZE;
  c.max_submit_bytes = 64 * 1024;
  c.features = RVGL_FEATURE_USERPTR | RVGL_FEATURE_EVENT_RING;
  std::strcpy(c.marketing_name, "virtio host");
  return c;
}

std::vector<uint8_t> bytes_of(const rvgl_capset &c) {
  std::vector<uint8_t> b(sizeof(c));
  std::memcpy(b.data(), &c, sizeof(c));
  return b;
}

// The host side: the context's decoder and shared page (a memfd the fake node maps for the
// guest), handlers that answer predictably.
struct RocmHost {
  UniqueFd shm_fd;
  Mapping shm;
  rvgl::ShmemView view;
  rvgl::CommandTable table;
  std::unique_ptr<rvgl::FrameDecoder> dec;
  bool init_header = true;
  int ring0_submits = 0;

  RocmHost() {
    auto add = [&](uint32_t cmd, rvgl::Handler h) {
      const auto *l = rvgl::find_layout(cmd);
      table.set(cmd, {l->name, h, l->req_size, l->rsp_size});
    };
    add(RVGL_CMD_NOP, [](void *, const rvgl::Request &, rvgl::Response &) { return 0; });
    add(RVGL_CMD_QUERY_INFO, [](void *, const rvgl::Request &req, rvgl::Response &rsp) {
      auto &r = rsp.as<rvgl_rsp_query_info>();
      r.query = req.as<rvgl_req_query_info>().query;
      r.size = 8;
      r.data.timestamp.gpu_timestamp = 5000000ull + req.seqno;
      return 0;
    });
    add(RVGL_CMD_BO_CREATE, [](void *, const rvgl::Request &req, rvgl::Response &rsp) {
      if (req.as<rvgl_req_bo_create>().size == 0) return -EINVAL;
      rsp.as<rvgl_rsp_bo_create>().bo = 11;
      return 0;
    });
    dec = std::make_unique<rvgl::FrameDecoder>(table, this, host_capset().max_submit_bytes);
  }

  int make_blob(const HostBlobRequest &b, UniqueFd &memory) {
    if (b.blob_id != 0 || b.blob_flags != RVGL_BLOB_FLAG_USE_MAPPABLE || b.size != RVGL_SHMEM_SIZE)
      return -EINVAL;
    shm_fd.reset(memfd_create("rvgl-shmem", MFD_CLOEXEC));
    if (!shm_fd || ftruncate(shm_fd.get(), RVGL_SHMEM_SIZE) != 0) return -ENOMEM;
    shm = std::move(*Mapping::map_shared(shm_fd.get(), RVGL_SHMEM_SIZE));
    view = rvgl::ShmemView(shm.data(), shm.size());
    if (init_header) view.init_header();
    memory.reset(dup(shm_fd.get()));
    return 0;
  }

  void run(uint32_t ring, bool given, std::span<const uint8_t> commands) {
    if (given && ring == RVGL_RING_CPU) {
      ++ring0_submits;
      dec->run(commands, view);
    }
  }

  void push_event(uint32_t type) {
    auto *h = view.header();
    rvgl_event ev{};
    ev.seq = h->event_wptr + 1;
    ev.type = type;
    std::memcpy(view.base() + RVGL_EVENT_RING_OFFSET +
                    (h->event_wptr % RVGL_EVENT_RING_ENTRIES) * sizeof(ev),
                &ev, sizeof(ev));
    __atomic_store_n(&h->event_wptr, h->event_wptr + 1, __ATOMIC_RELEASE);
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
  std::vector<ResponseTicket> tickets;
  for (int batch = 0; batch < 12; ++batch) {
    auto enc = f.session->encoder();
    for (int i = 0; i < 100; ++i) {
      auto t = enc.query_info(RVGL_INFO_TIMESTAMP);
      REQUIRE(t);
      tickets.push_back(*t);
    }
    REQUIRE(f.session->submit(enc));
  }
  for (const auto &t : tickets) {
    auto r = f.session->wait(t);
    REQUIRE(r);
    REQUIRE(r->result == 0);
    REQUIRE(r->as<rvgl_rsp_query_info>().data.timestamp.gpu_timestamp == 5000000ull + t.seqno);
  }
  CHECK(f.session->shared_page().async_error() == 0);
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
  auto none = f.session->wait_for_event(std::chrono::milliseconds(30));
  REQUIRE(none);
  CHECK_FALSE(*none);

  std::thread host([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    f.host.push_event(RVGL_EVENT_QUEUE_RESET);
    f.dev.release_fences();  // ring 63 retires when a record is unread
  });
  auto got = f.session->wait_for_event(std::chrono::seconds(5));
  host.join();
  REQUIRE(got);
  CHECK(*got);
  auto p = f.session->events().poll();
  REQUIRE(p.events.size() == 1);
  CHECK(p.events[0].type == RVGL_EVENT_QUEUE_RESET);
  auto exec = f.dev.calls(kNrExec).back();
  CHECK(exec.arg<rvgl_virtgpu_execbuffer>().ring_idx == RVGL_RING_EVENTS);
  CHECK(exec.commands.empty());
}
