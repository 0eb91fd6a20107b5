// The session end to end over the vtest transport, against a fake server whose "context" is the
// host's own FrameDecoder writing into a shared page it passes as a memfd.
#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "fake_rocm_host.h"
#include "fake_vtest_server.h"
#include "session_scenarios.h"
#include "rvgl_session.h"
#include "rvgl_vtest_transport.h"

using namespace rvgl::guest;
using rvgl::guest::test::BlobRequest;
using rvgl::guest::test::bytes_of;
using rvgl::guest::test::check_event_wakes_waiter;
using rvgl::guest::test::check_slots_reused_only_after_responses;
using rvgl::guest::test::fake_host_capset;
using rvgl::guest::test::FakeRocmHost;
using rvgl::guest::test::FakeVtestServer;
using rvgl::guest::test::SubmitRecord;

namespace {

rvgl_capset host_capset() {
  return fake_host_capset(RVGL_FEATURE_SPM | RVGL_FEATURE_EVENT_RING, "fake host");
}

// The shared fake host, plus an SPM_SET_DEST that is answered later, as the SPM worker does.
struct FakeHost : FakeRocmHost {
  std::atomic<uint32_t> deferred_rsp_off{RVGL_RSP_NONE};
  std::atomic<uint32_t> deferred_seqno{0};

  FakeHost() : FakeRocmHost(1000000, 7) {
    add(RVGL_CMD_SPM_SET_DEST, [](void *self, const rvgl::Request &req, rvgl::Response &) {
      auto *h = static_cast<FakeHost *>(static_cast<FakeRocmHost *>(self));
      h->deferred_seqno = req.seqno;
      h->deferred_rsp_off = req.rsp_off;
      return rvgl::kDeferred;
    });
  }

  UniqueFd make_shared_page(const BlobRequest &b) {
    UniqueFd fd;
    FakeRocmHost::make_shared_page(b.blob_id, b.blob_flags, b.size, &fd);
    return fd;
  }

  void run(const SubmitRecord &s) {
    if (s.ring_idx == RVGL_RING_CPU) decode(s.commands);
  }

  // The deferred SPM_SET_DEST response, as the SPM worker would write it.
  void answer_deferred(uint32_t bytes_copied) {
    rvgl_rsp_spm_set_dest r{};
    r.hdr.result = 0;
    r.hdr.seqno = deferred_seqno;
    r.bytes_copied = bytes_copied;
    view.write_response(deferred_rsp_off, {reinterpret_cast<const uint8_t *>(&r), sizeof(r)});
  }
};

struct Fixture {
  FakeHost host;
  FakeVtestServer server;
  std::unique_ptr<Session> session;
  Error open_error;

  explicit Fixture(std::function<void(Fixture &)> configure = {}, SessionOptions opts = {}) {
    server.capsets[{RVGL_CAPSET_ID, RVGL_CAPSET_VERSION}] = bytes_of(host_capset());
    server.context_capsets = {RVGL_CAPSET_ID};
    server.on_host3d_blob = [this](const BlobRequest &b) { return host.make_shared_page(b); };
    server.on_submit = [this](const SubmitRecord &s) { host.run(s); };
    if (configure) configure(*this);
    server.start();
    VtestOptions vo;
    vo.reply_timeout = std::chrono::seconds(5);
    auto t = VtestTransport::adopt(server.take_client(), vo);
    REQUIRE(t);
    auto s = Session::open(std::move(*t), opts);
    if (s)
      session = std::move(*s);
    else
      open_error = s.error();
  }
};

}  // namespace

TEST_CASE("a session checks the capset and maps the shared page", "[guest][session]") {
  Fixture f;
  REQUIRE(f.session);
  CHECK(std::string(f.session->capset().marketing_name) == "fake host");
  auto blobs = f.server.blobs();
  REQUIRE(blobs.size() == 1);
  CHECK(blobs[0].blob_mem == RVGL_BLOB_MEM_HOST3D);
  CHECK(blobs[0].blob_flags == RVGL_BLOB_FLAG_USE_MAPPABLE);
  CHECK(blobs[0].blob_id == 0);
  CHECK(blobs[0].size == RVGL_SHMEM_SIZE);
  CHECK(f.session->shared_page().validate_layout().ok());

  auto bo = f.session->call<rvgl_rsp_bo_create>(
      [](RequestEncoder &e) { return e.bo_create({.size = 4096, .domain = RVGL_DOMAIN_GTT}); });
  REQUIRE(bo);
  CHECK(bo->bo == 7);
  auto bad = f.session->call<rvgl_rsp_bo_create>(
      [](RequestEncoder &e) { return e.bo_create({.size = 0}); });
  CHECK(bad.code() == -EINVAL);

  f.session.reset();  // gives the shared page back
  f.server.join();
  CHECK(f.server.unrefs() == std::vector<uint32_t>{1});
}

TEST_CASE("many requests in flight: slots are reused only after their responses",
          "[guest][session]") {
  Fixture f;
  REQUIRE(f.session);
  check_slots_reused_only_after_responses(*f.session, 1000000);
}

TEST_CASE("execute returns the responses in order", "[guest][session]") {
  Fixture f;
  REQUIRE(f.session);
  auto enc = f.session->encoder();
  REQUIRE(enc.nop());
  REQUIRE(enc.nop(Reply::kNone));
  REQUIRE(enc.query_info(RVGL_INFO_MEMORY));
  REQUIRE(enc.bo_create({.size = 8192}));
  auto rs = f.session->execute(enc);
  REQUIRE(rs);
  REQUIRE(rs->size() == 3);
  CHECK((*rs)[0].cmd == RVGL_CMD_NOP);
  CHECK((*rs)[1].as<rvgl_rsp_query_info>().query == RVGL_INFO_MEMORY);
  CHECK((*rs)[2].as<rvgl_rsp_bo_create>().bo == 7);
  CHECK(f.session->submit(enc).code() == -EALREADY);
}

TEST_CASE("encoders go out in the order they were made", "[guest][session]") {
  Fixture f;
  REQUIRE(f.session);
  auto first = f.session->encoder();
  REQUIRE(first.nop());
  auto second = f.session->encoder();
  REQUIRE(second.nop());
  REQUIRE(f.session->submit(second));
  CHECK(f.session->submit(first).code() == -EINVAL);
}

TEST_CASE("a response the host writes later is waited for", "[guest][session]") {
  Fixture f;
  REQUIRE(f.session);
  auto enc = f.session->encoder();
  auto t = enc.spm_set_dest({.xcp = 0, .object = ObjectRef::handle(3), .size = 4096});
  REQUIRE(t);
  REQUIRE(f.session->submit(enc));

  SECTION("it comes") {
    std::thread worker([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(80));
      f.host.answer_deferred(4064);
    });
    auto r = f.session->wait(*t, std::chrono::seconds(5));
    worker.join();
    REQUIRE(r);
    CHECK(r->as<rvgl_rsp_spm_set_dest>().bytes_copied == 4064);
  }
  SECTION("it does not come in time") {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = f.session->wait(*t, std::chrono::milliseconds(100));
    CHECK(r.code() == -ETIMEDOUT);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3));
  }
}

TEST_CASE("hosts a session cannot use are refused with a reason", "[guest][session]") {
  SECTION("no ROCm capset") {
    Fixture f([](Fixture &x) { x.server.capsets.clear(); });
    CHECK(f.open_error.code == -ENOENT);
  }
  SECTION("another wire format") {
    Fixture f([](Fixture &x) {
      auto c = host_capset();
      c.wire_format_version = 9;
      x.server.capsets[{RVGL_CAPSET_ID, RVGL_CAPSET_VERSION}] = bytes_of(c);
    });
    CHECK(f.open_error.code == -EPROTONOSUPPORT);
  }
  SECTION("no context for the capset") {
    Fixture f([](Fixture &x) { x.server.context_capsets.clear(); });
    CHECK(f.open_error.code == -ECONNRESET);
  }
  SECTION("a shared page without its layout") {
    Fixture f([](Fixture &x) { x.host.init_header = false; });
    CHECK(f.open_error.code == -EPROTO);
  }
  SECTION("another capset id, as configured") {
    SessionOptions o;
    o.capset_id = 9;
    Fixture f({}, o);
    CHECK(f.open_error.code == -ENOENT);
  }
}

TEST_CASE("events: read from the shared page, and waited for on the events ring",
          "[guest][session]") {
  Fixture f([](Fixture &x) { x.server.hold_ring_fences = true; });
  REQUIRE(f.session);
  check_event_wakes_waiter(*f.session, [&] {
    f.host.push_event(RVGL_EVENT_QUEUE_RESET);
    f.server.release_fences();  // ring 63 retires when a record is unread
  });
  auto subs = f.server.submits();
  REQUIRE(subs.size() >= 2);
  CHECK(subs.back().ring_idx == RVGL_RING_EVENTS);
  CHECK(subs.back().commands.empty());
}

TEST_CASE("a submit over the host's limit is refused locally", "[guest][session]") {
  Fixture f;
  REQUIRE(f.session);
  auto enc = f.session->encoder();
  std::vector<rvgl_ib> ibs(4200);  // 67 KiB, over max_submit_bytes
  REQUIRE(enc.submit(1, ibs, {}, Reply::kNone));
  CHECK(f.session->submit(enc).code() == -E2BIG);
}
