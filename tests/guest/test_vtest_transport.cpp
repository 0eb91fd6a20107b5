// The vtest transport against the fake server: every message byte for byte, fds over SCM_RIGHTS,
// and a server that misbehaves.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "fake_vtest_server.h"
#include "rvgl_vtest_transport.h"
#include "support/open_fds.h"
#include "vtest_wire.h"

using namespace rvgl::guest;
using rvgl::guest::test::FakeVtestServer;
using rvgl::guest::test::Fault;
using rvgl::guest::test::ReceivedMessage;
using Dw = std::vector<uint32_t>;

namespace {

constexpr auto kShortTimeout = std::chrono::milliseconds(300);

// A server that knows capset 8 (v1) and can create its context, and a connected transport.
struct Fixture {
  FakeVtestServer server;
  std::unique_ptr<VtestTransport> t;
  Error adopt_error;

  explicit Fixture(std::function<void(FakeVtestServer &)> configure = {}, VtestOptions opts = {}) {
    server.capsets[{8, 1}] = {1, 2, 3, 4, 5, 6, 7, 8};
    server.context_capsets = {8};
    if (configure) configure(server);
    server.start();
    auto r = VtestTransport::adopt(server.take_client(), opts);
    if (r)
      t = std::move(*r);
    else
      adopt_error = r.error();
  }
  // Messages after the three of the handshake. Commands without a reply may still be in the
  // socket, so a round trip (GET_PARAM, left out of the result) first makes sure the server has
  // read and handled everything sent before.
  std::vector<ReceivedMessage> sent() const {
    if (t && !t->connection_failed()) (void)t->max_timeline_count();
    auto m = server.messages();
    if (!m.empty() && m.back().cmd == rvgl::guest::vtest::kCmdGetParam) m.pop_back();
    return {m.begin() + std::min<size_t>(3, m.size()), m.end()};
  }
};

Dw dw(const ReceivedMessage &m) {
  Dw d{m.len, m.cmd};
  auto body = m.dwords();
  d.insert(d.end(), body.begin(), body.end());
  return d;
}

}  // namespace

TEST_CASE("the handshake is CREATE_RENDERER, PING and PROTOCOL_VERSION", "[guest][vtest]") {
  VtestOptions opts;
  opts.client_name = "unit";
  Fixture f({}, opts);
  REQUIRE(f.t);
  CHECK(f.t->protocol_version() == 3);
  auto m = f.server.messages();
  REQUIRE(m.size() == 3);
  // CREATE_RENDERER's length is in bytes: the name and its NUL, unpadded.
  CHECK(m[0].cmd == 8);
  CHECK(m[0].len == 5);
  CHECK(m[0].body == std::vector<uint8_t>{'u', 'n', 'i', 't', 0});
  CHECK(dw(m[1]) == Dw{0, 10});
  CHECK(dw(m[2]) == Dw{1, 11, 3});
}

TEST_CASE("a server below protocol 3 is refused", "[guest][vtest]") {
  FakeVtestServer server;
  server.max_protocol_version = 2;
  server.start();
  auto r = VtestTransport::adopt(server.take_client());
  REQUIRE_FALSE(r);
  CHECK(r.code() == -EPROTONOSUPPORT);
}

TEST_CASE("GET_CAPSET returns the caps, or -ENOENT for valid = 0", "[guest][vtest]") {
  Fixture f;
  REQUIRE(f.t);
  auto caps = f.t->get_capset(8, 1);
  REQUIRE(caps);
  CHECK(*caps == std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8});
  auto none = f.t->get_capset(8, 2);  // above the max version
  CHECK(none.code() == -ENOENT);
  auto other = f.t->get_capset(99, 0);
  CHECK(other.code() == -ENOENT);
  CHECK_FALSE(f.t->connection_failed());
  auto m = f.sent();
  REQUIRE(m.size() == 3);
  CHECK(dw(m[0]) == Dw{2, 16, 8, 1});
  CHECK(dw(m[1]) == Dw{2, 16, 8, 2});
  CHECK(dw(m[2]) == Dw{2, 16, 99, 0});
}

TEST_CASE("CONTEXT_INIT is checked with a first context command", "[guest][vtest]") {
  SECTION("a capset the host serves") {
    Fixture f;
    REQUIRE(f.t);
    REQUIRE(f.t->init_context(8, 64));
    auto m = f.sent();
    REQUIRE(m.size() == 2);
    CHECK(dw(m[0]) == Dw{1, 17, 8});
    CHECK(dw(m[1]) == Dw{2, 19, 0, 0});  // the probe: SYNC_CREATE(0), kept as a timeline
    CHECK(f.server.context_created());
    CHECK(f.t->init_context(8, 64).code() == -EALREADY);
  }
  SECTION("a capset without a context type: the server drops us, we report it") {
    Fixture f([](FakeVtestServer &s) { s.context_capsets.clear(); });
    REQUIRE(f.t);
    auto s = f.t->init_context(8, 64);
    REQUIRE_FALSE(s);
    CHECK(s.code() == -ECONNRESET);
    CHECK(s.error().message.find("capset 8") != std::string::npos);
    CHECK(f.t->connection_failed());
    CHECK_FALSE(f.t->get_capset(8, 1).ok());  // latched
  }
  SECTION("invalid arguments are refused before they reach the server") {
    Fixture f;
    REQUIRE(f.t);
    CHECK(f.t->init_context(0, 64).code() == -EINVAL);
    CHECK(f.t->init_context(8, 65).code() == -EINVAL);
    CHECK(f.sent().empty());
  }
}

TEST_CASE("RESOURCE_CREATE_BLOB passes 64-bit fields and returns the fd", "[guest][vtest]") {
  int host_fd_for_check = -1;
  Fixture f([&](FakeVtestServer &s) {
    s.on_host3d_blob = [&](const rvgl::guest::test::BlobRequest &) {
      UniqueFd fd(memfd_create("host3d", MFD_CLOEXEC));
      REQUIRE(ftruncate(fd.get(), 65536) == 0);
      host_fd_for_check = dup(fd.get());
      return fd;
    };
  });
  REQUIRE(f.t);
  REQUIRE(f.t->init_context(8, 64));

  BlobParams p;
  p.blob_mem = RVGL_BLOB_MEM_HOST3D;
  p.blob_flags = RVGL_BLOB_FLAG_USE_MAPPABLE | RVGL_BLOB_FLAG_USE_SHAREABLE;
  p.blob_id = 0x1122334455667788ull;
  p.size = 0x100000000ull + 65536;  // over 4 GiB: the high dword matters
  auto big = f.t->create_blob(p);
  REQUIRE(big);
  CHECK(big->res_id == 1);
  CHECK(big->fd.valid());
  CHECK(big->memory.empty());  // HOST3D: mapped on request
  CHECK(dw(f.sent().back()) == Dw{6, 18, 2, 3, 0x00010000u, 0x1u, 0x55667788u, 0x11223344u});
  // The host's file is shorter than the blob claims: mapping refuses instead of risking SIGBUS.
  CHECK(f.t->map_blob(*big).code() == -EINVAL);

  p.size = 65536;
  p.blob_id = 5;
  auto blob = f.t->create_blob(p);
  REQUIRE(blob);
  REQUIRE(f.t->map_blob(*blob));
  REQUIRE(blob->memory.size() == 65536);
  std::memcpy(blob->memory.data() + 100, "shared", 6);
  char seen[6];
  REQUIRE(pread(host_fd_for_check, seen, 6, 100) == 6);
  CHECK(std::memcmp(seen, "shared", 6) == 0);
  close(host_fd_for_check);

  CHECK(f.t->unref_blob(std::move(*blob)));
  CHECK(dw(f.sent().back()) == Dw{1, 3, 2});
  // The server saw the unref (it is read before the next reply).
  REQUIRE(f.t->sync_create(0));
  CHECK(f.server.unrefs() == std::vector<uint32_t>{2});
}

TEST_CASE("GUEST blobs: the server's memfd is the guest memory", "[guest][vtest]") {
  Fixture f;
  REQUIRE(f.t);
  REQUIRE(f.t->init_context(8, 64));
  std::vector<uint8_t> mine(8192);
  for (size_t i = 0; i < mine.size(); ++i)
    mine[i] = static_cast<uint8_t>(i * 7);
  BlobParams p;
  p.blob_mem = RVGL_BLOB_MEM_GUEST;
  p.blob_flags = RVGL_BLOB_FLAG_USERPTR;
  p.size = 16384;
  p.guest_memory = mine;
  auto blob = f.t->create_blob(p);
  REQUIRE(blob);
  CHECK(dw(f.sent().back()) == Dw{6, 18, 1, 8, 16384, 0, 0, 0});
  REQUIRE(blob->memory.size() == 16384);
  CHECK(std::memcmp(blob->memory.data(), mine.data(), mine.size()) == 0);
  CHECK(blob->memory[9000] == 0);

  // What the guest writes, the host side sees through its own fd, and the reverse.
  (void)f.sent();
  auto fds = f.server.memfds();
  REQUIRE(fds.size() == 1);
  CHECK(fds[0].first == blob->res_id);
  auto host = Mapping::map_shared(fds[0].second, 16384);
  REQUIRE(host);
  CHECK(std::memcmp(host->data(), mine.data(), mine.size()) == 0);
  blob->memory[12000] = 0x5a;
  CHECK(host->data()[12000] == 0x5a);
  host->data()[12001] = 0xa5;
  CHECK(blob->memory[12001] == 0xa5);

  SECTION("guest memory larger than the blob, or for a host blob, is refused locally") {
    p.size = 4096;
    CHECK(f.t->create_blob(p).code() == -EINVAL);
    p.blob_mem = RVGL_BLOB_MEM_HOST3D;
    p.size = 65536;
    CHECK(f.t->create_blob(p).code() == -EINVAL);
    p.blob_mem = 7;
    p.guest_memory = {};
    CHECK(f.t->create_blob(p).code() == -EINVAL);
  }
}

TEST_CASE("SUBMIT_CMD2: one batch, commands, ring index and timeline syncs", "[guest][vtest]") {
  Fixture f;
  REQUIRE(f.t);
  REQUIRE(f.t->init_context(8, 64));
  const uint32_t cmds[] = {0x11, 0x22, 0x33, 0x44};
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t *>(cmds), sizeof(cmds));

  auto f1 = f.t->submit({bytes, 0u, true});
  REQUIRE(f1);
  // The probe sync (id 1) becomes ring 0's timeline; its first point is 1.
  CHECK(f1->id == 1);
  CHECK(f1->value == 1);
  CHECK(dw(f.sent().back()) ==
        Dw{16, 24, 1, /*flags*/ 1, /*cmd off*/ 9, /*cmd size*/ 4, /*sync off*/ 13,
           /*sync count*/ 1, /*ring*/ 0, 0, 0, 0x11, 0x22, 0x33, 0x44, 1, 1, 0});

  auto f2 = f.t->submit({bytes, 0u, true});
  REQUIRE(f2);
  CHECK(f2->id == 1);
  CHECK(f2->value == 2);

  auto f3 = f.t->submit({{}, 5u, true});  // another ring: a new sync
  REQUIRE(f3);
  auto m = f.sent();
  CHECK(dw(m[m.size() - 2]) == Dw{2, 19, 0, 0});
  CHECK(f3->id == 2);
  CHECK(dw(m.back()) == Dw{12, 24, 1, 1, 9, 0, 9, 1, 5, 0, 0, 2, 1, 0});

  auto f4 = f.t->submit({bytes, std::nullopt, false});  // no ring, no fence
  REQUIRE(f4);
  CHECK_FALSE(f4->valid());
  CHECK(dw(f.sent().back()) == Dw{13, 24, 1, 0, 9, 4, 13, 0, 0, 0, 0, 0x11, 0x22, 0x33, 0x44});

  REQUIRE(f.t->wait(*f2, kShortTimeout));
  auto subs = f.server.submits();
  REQUIRE(subs.size() == 4);
  CHECK(subs[0].commands == std::vector<uint8_t>(bytes.begin(), bytes.end()));
  CHECK(subs[2].ring_idx == 5);

  SECTION("bad submits are refused before anything is sent") {
    const size_t before = f.server.messages().size();
    const uint8_t odd[6] = {};
    CHECK(f.t->submit({odd, 0u, true}).code() == -EINVAL);
    CHECK(f.t->submit({bytes, 64u, true}).code() == -EINVAL);
    CHECK(f.t->sync_create(0));  // still in step
    CHECK(f.server.messages().size() == before + 1);
  }
}

TEST_CASE("waiting: SYNC_WAIT's eventfd, timeouts, and fences that retire later",
          "[guest][vtest]") {
  Fixture f([](FakeVtestServer &s) { s.hold_ring_fences = true; });
  REQUIRE(f.t);
  REQUIRE(f.t->init_context(8, 64));
  auto fence = f.t->submit({{}, 3u, true});
  REQUIRE(fence);

  const auto t0 = std::chrono::steady_clock::now();
  auto early = f.t->wait(*fence, std::chrono::milliseconds(50));
  REQUIRE(early);
  CHECK_FALSE(*early);
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(45));
  CHECK(dw(f.sent().back()) == Dw{5, 23, 0, 50, static_cast<uint32_t>(fence->id), 1, 0});

  auto instant = f.t->wait(*fence, std::chrono::milliseconds(0));
  REQUIRE(instant);
  CHECK_FALSE(*instant);

  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    f.server.release_fences();
  });
  auto done = f.t->wait(*fence, kWaitForever);
  later.join();
  REQUIRE(done);
  CHECK(*done);
  CHECK(f.sent().back().dwords()[1] == 0xffffffffu);  // the server keeps a forever wait
  auto again = f.t->wait(*fence, std::chrono::milliseconds(0));
  REQUIRE(again);
  CHECK(*again);
  CHECK(f.t->wait(Fence{}, kShortTimeout).code() == -EINVAL);
}

TEST_CASE("the sync commands byte for byte", "[guest][vtest]") {
  Fixture f;
  REQUIRE(f.t);
  REQUIRE(f.t->init_context(8, 64));
  auto id = f.t->sync_create(0x100000002ull);
  REQUIRE(id);
  CHECK(dw(f.sent().back()) == Dw{2, 19, 2, 1});
  REQUIRE(f.t->sync_write(*id, 0x300000004ull));
  CHECK(dw(f.sent().back()) == Dw{3, 22, *id, 4, 3});
  auto v = f.t->sync_read(*id);
  REQUIRE(v);
  CHECK(*v == 0x300000004ull);
  CHECK(dw(f.sent().back()) == Dw{1, 21, *id});
  const VtestSyncPoint pts[] = {{*id, 0x300000004ull}, {1, 0}};
  auto efd = f.t->sync_wait_fd(pts, true, 1000);
  REQUIRE(efd);
  CHECK(dw(f.sent().back()) == Dw{8, 23, 1, 1000, *id, 4, 3, 1, 0, 0});
  uint64_t ready = 0;
  CHECK(read(efd->get(), &ready, sizeof(ready)) == 8);
  CHECK(ready == 1);
  REQUIRE(f.t->sync_unref(*id));
  CHECK(dw(f.sent().back()) == Dw{1, 20, *id});
  auto n = f.t->max_timeline_count();
  REQUIRE(n);
  CHECK(*n == 64);
  CHECK(dw(f.server.messages().back()) == Dw{1, 15, 1});
  CHECK(f.server.live_syncs() == 1);
}

TEST_CASE("a misbehaving server gives clean errors, never a crash or a hang", "[guest][vtest]") {
  VtestOptions opts;
  opts.reply_timeout = kShortTimeout;
  struct Case {
    const char *name;
    Fault fault;
    int code;
  };
  const Case cases[] = {
      {"close instead of answering GET_CAPSET", {Fault::kCloseBeforeReply, 16, 0}, -ECONNRESET},
      {"close inside the header", {Fault::kCloseMidReply, 16, 4}, -ECONNRESET},
      {"close inside the caps", {Fault::kCloseMidReply, 16, 14}, -ECONNRESET},
      {"no answer", {Fault::kNoReply, 16, 0}, -ETIMEDOUT},
      {"wrong command id", {Fault::kWrongId, 16, 0}, -EPROTO},
      {"wrong length", {Fault::kWrongLength, 19, 0}, -EPROTO},
      {"absurd capset length", {Fault::kHugeLength, 16, 0}, -EPROTO},
      {"blob reply cut inside the res_id", {Fault::kCloseMidReply, 18, 10}, -ECONNRESET},
      {"blob without its fd", {Fault::kNoFd, 18, 0}, -EPROTO},
      {"blob with two fds", {Fault::kTwoFds, 18, 0}, -EPROTO},
      {"SYNC_WAIT without its fd", {Fault::kNoFd, 23, 0}, -EPROTO},
      {"close instead of the PING answer", {Fault::kCloseBeforeReply, 10, 0}, -ECONNRESET},
  };
  for (const auto &c : cases) {
    DYNAMIC_SECTION(c.name) {
      const size_t fds_before = rvgl::test::open_fd_count();
      {
        Fixture f([&](FakeVtestServer &s) { s.fault = c.fault; }, opts);
        const auto t0 = std::chrono::steady_clock::now();
        Status s;
        if (!f.t) {
          s = Status(f.adopt_error);
          CHECK(c.fault.cmd == 10);
          CHECK(s.code() == c.code);
        } else if (c.fault.cmd == 16) {
          s = f.t->get_capset(8, 1).status();
        } else {
          s = f.t->init_context(8, 64);
          if (s && c.fault.cmd == 18) {
            BlobParams p;
            p.blob_mem = RVGL_BLOB_MEM_GUEST;
            p.size = 4096;
            s = f.t->create_blob(p).status();
          } else if (s && c.fault.cmd == 23) {
            s = f.t->wait(*f.t->submit({{}, 0u, true}), kShortTimeout).status();
          }
        }
        REQUIRE_FALSE(s.ok());
        if (f.t) {
          CHECK(s.code() == c.code);
          CHECK(f.t->connection_failed());
          // Latched: later calls fail at once, without touching the stream.
          auto later = f.t->get_capset(8, 1);
          CHECK(later.code() == c.code);
          CHECK(later.error().message.find("unusable") != std::string::npos);
        }
        CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
      }
      CHECK(rvgl::test::open_fd_count() == fds_before);  // fds received in the mess were closed
    }
  }
}

TEST_CASE("a blob fd shorter than the blob is refused, not mapped", "[guest][vtest]") {
  Fixture f([](FakeVtestServer &s) { s.fault = {Fault::kShortFile, 18, 0}; });
  REQUIRE(f.t);
  REQUIRE(f.t->init_context(8, 64));
  BlobParams p;
  p.blob_mem = RVGL_BLOB_MEM_GUEST;
  p.size = 65536;
  auto b = f.t->create_blob(p);
  REQUIRE_FALSE(b);
  CHECK(b.code() == -EINVAL);
  // The resource it made was given back, and the connection is still in step.
  REQUIRE(f.t->sync_create(0));
  CHECK(f.server.unrefs() == std::vector<uint32_t>{1});
}

TEST_CASE("a server gone while a large submit is written is an error, not SIGPIPE",
          "[guest][vtest]") {
  VtestOptions opts;
  opts.reply_timeout = kShortTimeout;
  Fixture f({}, opts);
  REQUIRE(f.t);
  REQUIRE(f.t->init_context(8, 64));
  f.server.drop();
  f.server.join();
  std::vector<uint8_t> big(8 << 20, 0);
  auto r = f.t->submit({big, 0u, true});  // the process must survive this
  REQUIRE_FALSE(r);
  CHECK(r.code() == -EPIPE);
  CHECK(f.t->connection_failed());
}

TEST_CASE("connect reports a missing socket cleanly", "[guest][vtest]") {
  auto r = VtestTransport::connect("");
  CHECK(r.code() == -ENAMETOOLONG);
  auto dir = std::filesystem::temp_directory_path() / "rvgl-guest-no-such-dir-0x5a5a" / "sock";
  auto r2 = VtestTransport::connect(dir.string());
  CHECK(r2.code() == -ENOENT);
}
