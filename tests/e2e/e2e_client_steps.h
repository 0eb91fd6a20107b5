// What the end-to-end tests make a guest do through ComputeClient, with Catch2 checks on every
// step: connect, a GUEST userptr -> VRAM SDMA copy, fences, and the SPM commands.
#pragma once

#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "amd_packets.h"
#include "compute_client.h"
#include "vtest_server.h"

namespace rvgl::e2e {

using demo::ComputeClient;
using demo::GpuBuffer;

inline constexpr uint32_t kSdmaRing = 1;
inline constexpr uint64_t kCopySize = 256 * 1024;

inline std::unique_ptr<ComputeClient> connect(VtestServer &server, const std::string &name) {
  demo::ClientOptions o;
  o.client_name = name;
  auto c = ComputeClient::connect(server.socket_path(), o);
  INFO("server output:\n" << server.log());
  REQUIRE(c.ok());
  return std::move(*c);
}

template <class T>
T ok(guest::Result<T> r, const char *what) {
  INFO(what << ": " << (r ? std::string() : r.error().message) << " (" << r.code() << ")");
  REQUIRE(r.ok());
  return std::move(*r);
}
inline void ok(guest::Status s, const char *what) {
  INFO(what << ": " << (s ? std::string() : s.error().message) << " (" << s.code() << ")");
  REQUIRE(s.ok());
}

inline std::vector<uint8_t> pattern(uint32_t seed) {
  std::vector<uint8_t> p(kCopySize);
  auto *w = reinterpret_cast<uint32_t *>(p.data());
  std::iota(w, w + kCopySize / 4, seed);
  return p;
}

// What one guest does: a GUEST userptr blob with `data`, a VRAM HOST3D blob mapped from the fd
// vtest returned, an SDMA copy between them, the ring's fence waited for with SYNC_WAIT.
struct Copy {
  GpuBuffer src, dst, ib;
  uint32_t queue = 0;
};

inline Copy set_up_copy(ComputeClient &c, const std::vector<uint8_t> &data) {
  Copy k;
  k.src = ok(c.create_userptr(kCopySize, data), "GUEST userptr blob");
  k.dst = ok(c.create_buffer(kCopySize, RVGL_DOMAIN_VRAM, RVGL_BO_FLAG_CPU_ACCESS), "VRAM blob");
  REQUIRE(k.dst.blob.fd.valid());               // vtest passed the blob's fd over the socket
  REQUIRE(k.dst.memory().size() == kCopySize);  // ... and the guest mapped it
  std::memset(k.dst.memory().data(), 0, kCopySize);
  k.ib = ok(c.create_buffer(4096, RVGL_DOMAIN_GTT), "IB blob");
  ok(c.map_gpu(k.src, RVGL_VA_FLAG_READ), "VA_MAP userptr");
  ok(c.map_gpu(k.dst), "VA_MAP VRAM");
  ok(c.map_gpu(k.ib, RVGL_VA_FLAG_READ | RVGL_VA_FLAG_EXECUTE), "VA_MAP IB");
  k.queue = ok(c.create_queue(RVGL_IP_SDMA, kSdmaRing), "SDMA queue");
  return k;
}

inline void submit_copy(ComputeClient &c, Copy &k) {
  std::vector<uint32_t> ib;
  packets::sdma_copy_linear(ib, k.dst.va, k.src.va, static_cast<uint32_t>(kCopySize));
  packets::sdma_pad(ib);
  ok(c.submit(k.queue, k.ib, 0, ib), "SUBMIT");
}

inline void wait_ring(ComputeClient &c, uint32_t ring) {
  auto f = ok(c.fence(ring), "fence");
  REQUIRE(ok(c.wait(f, std::chrono::seconds(20)), "SYNC_WAIT"));
}

inline void run_copy(ComputeClient &c, uint32_t seed) {
  const auto data = pattern(seed);
  Copy k = set_up_copy(c, data);
  submit_copy(c, k);
  wait_ring(c, kSdmaRing);
  CHECK(std::memcmp(k.dst.memory().data(), data.data(), kCopySize) == 0);
}

// SPM_ACQUIRE / SPM_RELEASE of partition 0: 0 or the host's negative errno.
inline int spm_acquire(ComputeClient &c, uint32_t ring_idx) {
  return c.session()
      .call<rvgl_rsp_spm_acquire>(
          [&](guest::RequestEncoder &e) { return e.spm_acquire(0, ring_idx); })
      .code();
}
inline int spm_release(ComputeClient &c) {
  return c.session()
      .call<rvgl_rsp_spm_release>([&](guest::RequestEncoder &e) { return e.spm_release(0); })
      .code();
}

}  // namespace rvgl::e2e
