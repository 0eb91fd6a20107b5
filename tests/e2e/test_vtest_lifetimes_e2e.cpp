// Issue 14, findings 1b and 1c, through the stock virgl_test_server (forked per client, and
// --no-fork --multi-clients): the SPM streams into a GUEST userptr blob, and the guest drops the
// blob (1b) or disconnects (1c) while a SET_DEST is blocked in the kernel. The server unmaps the
// blob's memfd at once and maps the next blobs it creates — this client's, another client's — in
// the hole. Those blobs must keep exactly what their guests put there: 0 bytes written into them.
#include <unistd.h>

#include <chrono>
#include <thread>

#include "e2e_client_steps.h"

using namespace rvgl::e2e;
using rvgl::demo::ComputeClient;
using rvgl::demo::GpuBuffer;

namespace {

constexpr uint32_t kSpmRing = 9;
constexpr uint64_t kDest = 1ull << 20;
constexpr uint32_t kBlockedMs = 600;
constexpr int kVictims = 4;

std::vector<uint8_t> fill(uint8_t v) {
  return std::vector<uint8_t>(kDest, v);
}

size_t differing(const GpuBuffer &b, uint8_t v) {
  size_t n = 0;
  for (uint8_t x : b.memory())
    n += x != v;
  return n;
}

// SPM acquired, streaming into `dst`, and a SET_DEST retiring it blocked in the kernel; returns
// the pending SET_DEST's handle.
rvgl::guest::ResponseTicket stream_and_block(ComputeClient &c, GpuBuffer &dst, GpuBuffer &next) {
  auto &s = c.session();
  REQUIRE(spm_acquire(c, kSpmRing) == 0);
  rvgl::guest::SpmSetDestArgs a;
  a.object = rvgl::guest::ObjectRef::resource(dst.blob.res_id);
  a.size = kDest;
  auto first = ok(s.call<rvgl_rsp_spm_set_dest>(
                      [&](rvgl::guest::RequestEncoder &e) { return e.spm_set_dest(a); }),
                  "SET_DEST into the userptr blob");
  REQUIRE(first.hdr.result == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // samples flow into it
  a.object = rvgl::guest::ObjectRef::resource(next.blob.res_id);
  a.timeout_ms = kBlockedMs;
  auto enc = s.encoder();
  auto pending = enc.spm_set_dest(a);
  REQUIRE(pending);
  REQUIRE(s.submit(enc));
  return *pending;
}

}  // namespace

TEST_CASE(
    "1b: a GUEST userptr SPM destination unref'd mid-stream writes nothing into the "
    "blobs mapped after it",
    "[e2e][spm][lifetime]") {
  const bool one_process = GENERATE(false, true);
  INFO((one_process ? "--no-fork --multi-clients" : "forked per client"));
  ServerOptions so;
  so.one_process = one_process;
  so.extra_env = {"RVGL_EMU_SPM_RATE_HZ=20000"};
  VtestServer server(so);
  auto c1 = connect(server, "streamer");
  auto dst = ok(c1->create_userptr(kDest), "userptr destination");
  auto next = ok(c1->create_buffer(kDest, RVGL_DOMAIN_GTT), "next destination");
  auto pending = stream_and_block(*c1, dst, next);

  ok(c1->release(std::move(dst)), "unref of the streaming destination");
  // Blobs the server maps next, likely in the hole: this client's, and (one process) another's.
  std::vector<GpuBuffer> victims;
  for (int i = 0; i < kVictims; ++i)
    victims.push_back(ok(c1->create_userptr(kDest, fill(0x5a)), "victim blob"));
  std::unique_ptr<ComputeClient> c2;
  if (one_process) {
    c2 = connect(server, "bystander");
    for (int i = 0; i < kVictims; ++i)
      victims.push_back(ok(c2->create_userptr(kDest, fill(0x5a)), "bystander blob"));
  }
  auto rsp = ok(c1->session().wait(pending, std::chrono::milliseconds(5000)), "blocked SET_DEST");
  CHECK(rsp.result == 0);
  size_t written = 0;
  for (const auto &v : victims)
    written += differing(v, 0x5a);
  CHECK(written == 0);
}

TEST_CASE(
    "1c: a guest that disconnects with SET_DEST blocked writes nothing into the next "
    "guest's blobs",
    "[e2e][spm][lifetime]") {
  const bool one_process = GENERATE(false, true);
  INFO((one_process ? "--no-fork --multi-clients" : "forked per client"));
  ServerOptions so;
  so.one_process = one_process;
  so.extra_env = {"RVGL_EMU_SPM_RATE_HZ=20000"};
  VtestServer server(so);
  {
    auto c1 = connect(server, "leaver");
    auto dst = ok(c1->create_userptr(kDest), "userptr destination");
    auto next = ok(c1->create_buffer(kDest, RVGL_DOMAIN_GTT), "next destination");
    (void)stream_and_block(*c1, dst, next);
  }  // disconnects with the SET_DEST still blocked
  auto c2 = connect(server, "next guest");
  std::vector<GpuBuffer> victims;
  for (int i = 0; i < kVictims; ++i)
    victims.push_back(ok(c2->create_userptr(kDest, fill(0x5a)), "next guest's blob"));
  // Past the blocked call's timeout: whatever the released session still did is done.
  std::this_thread::sleep_for(std::chrono::milliseconds(kBlockedMs + 400));
  size_t written = 0;
  for (const auto &v : victims)
    written += differing(v, 0x5a);
  CHECK(written == 0);
}
