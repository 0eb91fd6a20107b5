// End to end through Debian's stock /usr/bin/virgl_test_server (vtest protocol 3), with the
// emulated GPU and librocm_virgl.so preloaded and RVGL_COMPUTE_ONLY=1, driven by the guest
// library's vtest transport — no VM, no GPU.
#include "e2e_client_steps.h"

using namespace rvgl::e2e;
using rvgl::demo::ComputeClient;

TEST_CASE("a guest copies userptr to VRAM through the stock vtest server", "[e2e]") {
  VtestServer server;
  auto c = connect(server, "e2e-flow");
  const rvgl_capset &cap = c->capset();
  CHECK(cap.wire_format_version == RVGL_WIRE_FORMAT_VERSION);
  CHECK(cap.pci_vendor_id == 0x1002);
  CHECK(c->transport().protocol_version() == 3);
  run_copy(*c, 0xe2e00000u);
  CHECK(c->session().shared_page().async_error() == 0);
  CHECK(server.running());
}

TEST_CASE("two clients at once stay isolated", "[e2e]") {
  const bool one_process = GENERATE(false, true);
  INFO((one_process ? "--no-fork --multi-clients: both contexts in one server process"
                    : "default: one forked server process per client"));
  ServerOptions o;
  o.one_process = one_process;
  VtestServer server(o);
  auto a = connect(server, "client-a");
  auto b = connect(server, "client-b");

  // Same blob ids, same GPU VAs, same rings: each context's names are its own.
  const auto da = pattern(0xaaaa0000u), db = pattern(0xbbbb0000u);
  Copy ka = set_up_copy(*a, da);
  Copy kb = set_up_copy(*b, db);
  CHECK(ka.dst.va == kb.dst.va);
  submit_copy(*a, ka);
  submit_copy(*b, kb);
  wait_ring(*b, kSdmaRing);
  wait_ring(*a, kSdmaRing);
  CHECK(std::memcmp(ka.dst.memory().data(), da.data(), kCopySize) == 0);
  CHECK(std::memcmp(kb.dst.memory().data(), db.data(), kCopySize) == 0);

  // In one process resource ids are the server's, unique across clients: a cannot name b's.
  // (Forked, each process numbers its own and the same id names each client's own resource.)
  if (!one_process) return;
  REQUIRE(ka.dst.blob.res_id != kb.dst.blob.res_id);
  auto r = a->session().call<rvgl_rsp_va_map>([&](rvgl::guest::RequestEncoder &e) {
    rvgl::guest::VaMapArgs m;
    m.object = rvgl::guest::ObjectRef::resource(kb.dst.blob.res_id);
    m.va = ka.dst.va + 64 * kCopySize;
    m.size = kCopySize;
    return e.va_map(m);
  });
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == -ENOENT);
}

TEST_CASE("a client that disconnects mid-flight leaves the server serving the next", "[e2e]") {
  const bool one_process = GENERATE(false, true);
  INFO((one_process ? "--no-fork --multi-clients" : "forked per client"));
  ServerOptions o;
  o.one_process = one_process;
  VtestServer server(o);
  std::unique_ptr<ComputeClient> waiting;
  if (one_process) waiting = connect(server, "bystander");  // shares the server process

  {
    auto gone = connect(server, "leaves-early");
    Copy k = set_up_copy(*gone, pattern(1));
    for (int i = 0; i < 8; ++i)
      submit_copy(*gone, k);
    auto f = gone->fence(kSdmaRing);  // a fence it will never wait for
    REQUIRE(f.ok());
    // Dropped here: socket closed with work queued, blobs mapped and a fence outstanding.
  }

  auto next = connect(server, "next");
  run_copy(*next, 0x0e070000u);
  if (waiting) run_copy(*waiting, 0x0b570000u);
  CHECK(server.running());
}

TEST_CASE("with EGL available, vrend and ROCM share the stock server", "[e2e]") {
  // No RVGL_COMPUTE_ONLY: the server's own EGL flags reach the real library (surfaceless, so
  // Mesa's software EGL suffices) and vrend starts beside us.
  ServerOptions o;
  o.compute_only = false;
  o.extra_env = {"VTEST_USE_EGL_SURFACELESS=1"};
  VtestServer server(o);
  rvgl::demo::ClientOptions co;
  co.client_name = "beside-vrend";
  auto c = ComputeClient::connect(server.socket_path(), co);
  if (!c && server.log().find("failed to initialise renderer") != std::string::npos) {
    WARN(
        "skipped: the stock server could not start vrend's EGL here (no render node, no software "
        "EGL); RVGL_COMPUTE_ONLY=1 is how such hosts run it");
    return;
  }
  INFO("server output:\n" << server.log());
  REQUIRE(c.ok());
  run_copy(**c, 0x76e40000u);
}
