// Issue 18: user queues through the protocol, written from PROTOCOL.md section 6 (QUEUE_CREATE)
// alone. Every byte the guest writes is what the real kernel expects too: the doorbell index and
// its 64-bit value as amdgpu_userq_get_doorbell_index() and gfx_v11_0_ring_set_wptr_compute() use
// them, the ring pointers as the CP and SDMA engines count them.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../tools/common/amd_packets.h"
#include "support/context_harness.h"
#include "support/guest_ram.h"
#include "support/scoped_knob.h"

using namespace rvgl;
using namespace rvgl::test;
namespace pk = rvgl::packets;

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint32_t kBell = 3;  // the queue's doorbell index: bytes 24..31 of the doorbell object

bool profile_is(const char *name) {
  const char *p = std::getenv("RVGL_EMU_PROFILE");
  return p && std::string(p) == name;
}

template <class F>
bool eventually(F f, int ms = 5000) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!f()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

// A guest's user-queue setup, laid out as PROTOCOL.md asks: a 64 KiB ring, rptr and wptr each at
// the start of a one-page object, an EOP / context save area, a data buffer, a doorbell object.
struct Guest {
  ContextHarness h;
  uint64_t va0 = 0;
  ContextHarness::HostBuffer ring, rptr, wptr, eop, data, bell;

  Guest() {
    h.create_shmem();
    va0 = h.capset().va_start;
    ring = h.mapped_bo(64 * 1024);
    rptr = h.mapped_bo(4096);
    wptr = h.mapped_bo(4096);
    eop = h.mapped_bo(4096);
    data = h.mapped_bo(64 * 1024);
    bell = h.mapped_bo(4096, RVGL_DOMAIN_DOORBELL);
    REQUIRE(h.va_map(ring.bo, 0, 0, ring_va(), ring.size, RVGL_VA_FLAG_READ) == 0);
    REQUIRE(h.va_map(rptr.bo, 0, 0, rptr_va(), 4096) == 0);
    REQUIRE(h.va_map(wptr.bo, 0, 0, wptr_va(), 4096, RVGL_VA_FLAG_READ) == 0);
    REQUIRE(h.va_map(eop.bo, 0, 0, eop_va(), 4096) == 0);
    REQUIRE(h.va_map(data.bo, 0, 0, data_va(), data.size) == 0);
  }
  uint64_t ring_va() const { return va0; }
  uint64_t rptr_va() const { return va0 + kMiB; }
  uint64_t wptr_va() const { return va0 + 2 * kMiB; }
  uint64_t eop_va() const { return va0 + 3 * kMiB; }
  uint64_t data_va() const { return va0 + 4 * kMiB; }

  rvgl_req_queue_create request(uint32_t ip, uint32_t ring_idx) const {
    rvgl_req_queue_create q{};
    q.kind = RVGL_QUEUE_KIND_USER;
    q.ip = ip;
    q.ring_idx = ring_idx;
    q.queue_va = ring_va();
    q.queue_size = ring.size;
    q.rptr_va = rptr_va();
    q.wptr_va = wptr_va();
    q.eop_va = eop_va();
    q.doorbell_bo = bell.bo;
    q.doorbell_offset = kBell;
    return q;
  }
  int32_t create(const rvgl_req_queue_create &q, uint32_t *queue = nullptr) {
    auto rsp = h.call<rvgl_rsp_queue_create>(RVGL_CMD_QUEUE_CREATE, q);
    if (queue) *queue = rsp.queue;
    return rsp.hdr.result;
  }
  // Publishes ring contents up to w as the kernel's own rings do
  // (gfx_v11_0_ring_set_wptr_compute(), sdma_v6_0_ring_set_wptr()): the 64-bit write pointer to
  // memory, then the same 64-bit value to the queue's doorbell, byte 8 * doorbell_offset of the
  // doorbell object.
  void ring_doorbell(uint64_t w) {
    __atomic_store_n(wptr.ptr<uint64_t>(), w, __ATOMIC_RELEASE);
    __atomic_store_n(bell.ptr<uint64_t>() + kBell, w, __ATOMIC_RELEASE);
  }
  uint32_t compute_rptr() const { return __atomic_load_n(rptr.ptr<uint32_t>(), __ATOMIC_ACQUIRE); }
  uint64_t sdma_rptr() const { return __atomic_load_n(rptr.ptr<uint64_t>(), __ATOMIC_ACQUIRE); }
  void put(uint64_t at_dw, const std::vector<uint32_t> &dw) {
    const uint64_t ring_dw = ring.size / 4;
    for (size_t i = 0; i < dw.size(); ++i)
      ring.ptr<uint32_t>()[(at_dw + i) % ring_dw] = dw[i];
  }
};

}  // namespace

TEST_CASE("a guest following PROTOCOL.md runs work on a compute user queue", "[context][userq]") {
  if (!profile_is("gfx1100")) return;  // gfx942 has none: see the refusals below
  Guest g;
  const rvgl_capset &cap = g.h.capset();
  REQUIRE(cap.features & RVGL_FEATURE_USER_QUEUES);
  REQUIRE(cap.user_queue_ip_mask == ((1u << RVGL_IP_COMPUTE) | (1u << RVGL_IP_SDMA)));
  CHECK(cap.userq_eop_size == 2048);
  CHECK(cap.userq_eop_alignment == 256);
  CHECK(cap.protocol_minor == 1);

  uint32_t q = 0;
  REQUIRE(g.create(g.request(RVGL_IP_COMPUTE, 1), &q) == 0);
  CHECK(q == 1);

  std::vector<uint32_t> pkt;
  pk::pm4_write_data(pkt, g.data_va(), {0x600df00du, 0x2});
  g.put(0, pkt);
  g.ring_doorbell(pkt.size());
  CHECK(eventually([&] { return g.data.ptr<uint32_t>()[1] == 0x2; }));
  CHECK(g.data.ptr<uint32_t>()[0] == 0x600df00du);
  // The CP writes its read position back: a 32-bit dword offset inside the ring.
  CHECK(eventually([&] { return g.compute_rptr() == pkt.size(); }));

  // Up to the end of the ring, then across it: wptr keeps counting, rptr wraps.
  const uint64_t ring_dw = g.ring.size / 4;
  const uint64_t w = ring_dw - 3;
  g.put(pkt.size(), std::vector<uint32_t>(w - pkt.size(), 0x80000000u));  // type-2 fillers
  g.ring_doorbell(w);
  REQUIRE(eventually([&] { return g.compute_rptr() == w; }));
  std::vector<uint32_t> wrap;
  pk::pm4_write_data(wrap, g.data_va() + 64, {0xa, 0xb, 0xc, 0xd});
  g.put(w, wrap);
  g.ring_doorbell(w + wrap.size());
  CHECK(eventually([&] { return g.data.ptr<uint32_t>()[19] == 0xd; }));
  CHECK(g.data.ptr<uint32_t>()[16] == 0xa);
  CHECK(eventually([&] { return g.compute_rptr() == (w + wrap.size()) % ring_dw; }));

  const auto st = g.h.queue_state(q);
  CHECK(st.hdr.result == 0);
  CHECK(st.state == RVGL_QUEUE_STATE_OK);
  CHECK(st.flags == 0);
  CHECK(st.error == 0);
  CHECK(st.last_submitted_seq == 0);
  CHECK(st.last_completed_seq == 0);

  // User queues take no SUBMIT; destroying one frees its doorbell for the next queue.
  int32_t r;
  g.h.submit(q, {rvgl_ib{g.data_va(), 16, 0}}, {}, &r);
  CHECK(r == -EOPNOTSUPP);
  CHECK(g.h.queue_destroy(q) == 0);
  CHECK(g.create(g.request(RVGL_IP_COMPUTE, 1), &q) == 0);
}

TEST_CASE("an SDMA user queue takes a context save area and counts bytes", "[context][userq]") {
  if (!profile_is("gfx1100")) return;
  Guest g;
  const rvgl_capset &cap = g.h.capset();
  CHECK(cap.userq_sdma_csa_size == 32);
  CHECK(cap.userq_sdma_csa_alignment == 4);
  auto req = g.request(RVGL_IP_SDMA, 2);
  req.eop_va = 0;  // SDMA needs its context save area too
  CHECK(g.create(req) == -EINVAL);
  req.eop_va = g.eop_va() + 4096 - 32;  // the area may end where the mapping does
  uint32_t q = 0;
  REQUIRE(g.create(req, &q) == 0);
  std::vector<uint32_t> pkt;
  pk::sdma_write_linear(pkt, g.data_va(), {0x5d3a0001u, 0x5d3a0002u});
  pk::sdma_fence(pkt, g.data_va() + 256, 77);
  g.put(0, pkt);
  g.ring_doorbell(pkt.size() * 4);  // SDMA pointers count bytes
  CHECK(eventually([&] { return g.data.ptr<uint32_t>()[64] == 77; }));
  CHECK(g.data.ptr<uint32_t>()[1] == 0x5d3a0002u);
  CHECK(eventually([&] { return g.sdma_rptr() == pkt.size() * 4; }));
}

TEST_CASE("a doorbell written anywhere but the queue's own runs nothing", "[context][userq]") {
  if (!profile_is("gfx1100")) return;
  Guest g;
  uint32_t q = 0;
  REQUIRE(g.create(g.request(RVGL_IP_COMPUTE, 1), &q) == 0);
  std::vector<uint32_t> pkt;
  pk::pm4_write_data(pkt, g.data_va(), {1});
  g.put(0, pkt);
  // More than the ring holds: taken as a write pointer it would hang the queue at once. It goes
  // to the write pointer in memory, to the next doorbell, and to dword 3 (byte 12), where a guest
  // counting the offset in dwords would ring.
  const uint64_t poison = g.ring.size / 4 + 1;
  *g.wptr.ptr<uint64_t>() = poison;
  g.bell.ptr<uint64_t>()[kBell + 1] = poison;
  g.bell.ptr<uint32_t>()[kBell] = static_cast<uint32_t>(poison);
  __atomic_store_n(g.bell.ptr<uint64_t>() + kBell, pkt.size(), __ATOMIC_RELEASE);
  CHECK(eventually([&] { return g.data.ptr<uint32_t>()[0] == 1; }));
  CHECK(eventually([&] { return g.compute_rptr() == pkt.size(); }));
  CHECK(g.h.queue_state(q).state == RVGL_QUEUE_STATE_OK);
}

TEST_CASE("a user queue that faults is reported lost and hung by QUEUE_STATE", "[context][userq]") {
  if (!profile_is("gfx1100")) return;
  Guest g;
  uint32_t q = 0;
  REQUIRE(g.create(g.request(RVGL_IP_COMPUTE, 1), &q) == 0);
  std::vector<uint32_t> pkt;
  pk::pm4_write_data(pkt, g.va0 + 512 * kMiB, {1});  // nothing is mapped there
  pk::pm4_write_data(pkt, g.data_va(), {2});
  g.put(0, pkt);
  g.ring_doorbell(pkt.size());
  rvgl_rsp_queue_state st{};
  CHECK(eventually([&] {
    st = g.h.queue_state(q);
    return st.state == RVGL_QUEUE_STATE_LOST;
  }));
  CHECK(st.hdr.result == 0);
  // The only queue the host looked at: the fault cache's new entry is its own.
  CHECK(st.flags == (RVGL_QUEUE_FLAG_HANG | RVGL_QUEUE_FLAG_VM_FAULT));
  CHECK(st.error == -ETIME);
  CHECK(g.compute_rptr() == 0);           // the engine stopped on the first packet
  CHECK(g.data.ptr<uint32_t>()[0] == 0);  // and ran nothing after it
  // Published after its records: exactly one VM_FAULT and one QUEUE_HANG name the queue.
  const auto *hdr = reinterpret_cast<const rvgl_shmem_header *>(g.h.shmem());
  REQUIRE(hdr->event_wptr == 2);
  std::vector<uint32_t> types;
  for (uint32_t i = 0; i < 2; ++i) {
    rvgl_event e;
    std::memcpy(&e, g.h.shmem() + RVGL_EVENT_RING_OFFSET + i * sizeof(e), sizeof(e));
    CHECK(e.queue == q);
    types.push_back(e.type);
  }
  CHECK(types == std::vector<uint32_t>{RVGL_EVENT_VM_FAULT, RVGL_EVENT_QUEUE_HANG});
  // The state stays what it became; destroying the queue frees its doorbell.
  CHECK(g.h.queue_state(q).flags == (RVGL_QUEUE_FLAG_HANG | RVGL_QUEUE_FLAG_VM_FAULT));
  CHECK(g.h.queue_destroy(q) == 0);
  CHECK(g.create(g.request(RVGL_IP_COMPUTE, 1), &q) == 0);
}

TEST_CASE("QUEUE_CREATE refuses every user-queue field PROTOCOL.md rules out", "[context][userq]") {
  if (!profile_is("gfx1100")) return;
  Guest g;
  const auto good = g.request(RVGL_IP_COMPUTE, 1);
  auto with = [&](auto change) {
    auto q = good;
    change(q);
    return g.create(q);
  };
  using Q = rvgl_req_queue_create;
  // Ring: a power of two of at least 4096 bytes, 256-byte aligned, inside one mapping.
  CHECK(with([](Q &q) { q.queue_size = 3 * 4096; }) == -EINVAL);
  CHECK(with([](Q &q) { q.queue_size = 2048; }) == -EINVAL);
  CHECK(with([](Q &q) { q.queue_size = 128 * 1024; }) == -EINVAL);  // past the mapping
  CHECK(with([&](Q &q) { q.queue_va += 0x80, q.queue_size = 32 * 1024; }) == -EINVAL);
  CHECK(with([&](Q &q) { q.queue_va = g.data_va() + 64 * 1024; }) == -EINVAL);  // unmapped
  // rptr: 8-byte aligned, a page mapped writable from it.
  CHECK(with([&](Q &q) { q.rptr_va += 4; }) == -EINVAL);
  CHECK(with([&](Q &q) { q.rptr_va += 8; }) == -EINVAL);
  CHECK(with([&](Q &q) { q.rptr_va = g.wptr_va(); }) == -EACCES);  // mapped READ only
  // wptr: 8-byte aligned, the start of a mapping of an object of at most 4096 bytes.
  CHECK(with([&](Q &q) { q.wptr_va += 4; }) == -EINVAL);
  CHECK(with([&](Q &q) { q.wptr_va += 8; }) == -EINVAL);
  CHECK(with([&](Q &q) { q.wptr_va = g.data_va(); }) == -EINVAL);  // a 64 KiB object
  {
    // Guest memory (a userptr blob) is never the wptr: the queue keeps it bound for the firmware
    // for its whole life, which no detach of the guest's pages could end.
    GuestPages page(4096);
    int err;
    const uint32_t res = userptr_blob(g.h, page, &err);
    REQUIRE(err == 0);
    const uint64_t va = g.data_va() + 1024 * 1024;
    REQUIRE(g.h.va_map(0, res, 0, va, 4096, RVGL_VA_FLAG_READ) == 0);
    CHECK(with([&](Q &q) { q.wptr_va = va; }) == -EINVAL);
    REQUIRE(g.h.va_unmap(va, 4096) == 0);
    g.h.ctx().detach_resource(res);
    // Nor a DOORBELL object, which the kernel would try to move into GTT for the firmware.
    REQUIRE(g.h.va_map(g.bell.bo, 0, 0, va, 4096, RVGL_VA_FLAG_READ) == 0);
    CHECK(with([&](Q &q) { q.wptr_va = va; }) == -EINVAL);
    REQUIRE(g.h.va_unmap(va, 4096) == 0);
  }
  {
    // At most 2 GiB: the kernel keeps the ring's size in 32 bits, and 4 GiB would be a ring of
    // size 0 to the engine.
    constexpr uint64_t kBig = 1ull << 32;
    int32_t r;
    const uint32_t big = g.h.bo_create(kBig, RVGL_DOMAIN_GTT, 0, 0, &r);
    REQUIRE(r == 0);
    const uint64_t va = g.va0 + kBig;
    REQUIRE(g.h.va_map(big, 0, 0, va, kBig, RVGL_VA_FLAG_READ) == 0);
    CHECK(with([&](Q &q) { q.queue_va = va, q.queue_size = kBig; }) == -EINVAL);
    REQUIRE(g.h.va_unmap(va, kBig) == 0);
    REQUIRE(g.h.bo_free(big) == 0);
  }
  // EOP: capset.userq_eop_alignment, capset.userq_eop_size bytes inside one writable mapping.
  CHECK(with([&](Q &q) { q.eop_va += 4; }) == -EINVAL);
  CHECK(with([&](Q &q) { q.eop_va += 4096 - 1024; }) == -EINVAL);  // 0x700 bytes past
  CHECK(with([&](Q &q) { q.eop_va = g.ring_va(); }) == -EACCES);   // the ring is READ only
  CHECK(with([&](Q &q) { q.eop_va = 0; }) == -EINVAL);
  // The doorbell: a DOORBELL object of this context, an 8-byte doorbell inside it.
  CHECK(with([&](Q &q) { q.doorbell_bo = 99; }) == -ENOENT);
  CHECK(with([&](Q &q) { q.doorbell_bo = g.data.bo; }) == -EINVAL);
  CHECK(with([&](Q &q) { q.doorbell_offset = 512; }) == -EINVAL);
  CHECK(with([&](Q &q) { q.doorbell_offset = 0xffffffffu; }) == -EINVAL);
  // Nothing above was created: the good request works, once per doorbell and per ring.
  uint32_t q1 = 0;
  CHECK(g.create(good, &q1) == 0);
  CHECK(with([](Q &q) { q.ring_idx = 2; }) == -EBUSY);                      // the doorbell is taken
  CHECK(with([](Q &q) { q.doorbell_offset = 511; }) == -EBUSY);             // ring 1 is bound
  CHECK(with([](Q &q) { q.ring_idx = 2, q.doorbell_offset = 511; }) == 0);  // the last doorbell
  CHECK(g.h.ctx().stats().queues == 2);
}

TEST_CASE("without user queues, QUEUE_CREATE(USER) and DOORBELL objects answer -ENODEV",
          "[context][userq]") {
  ContextHarness h;
  h.create_shmem();
  const rvgl_capset &cap = h.capset();
  if (cap.features & RVGL_FEATURE_USER_QUEUES) {
    CHECK_FALSE(profile_is("gfx942"));
    return;
  }
  CHECK(profile_is("gfx942"));
  CHECK(cap.gfx_ip_major == 9);
  CHECK(cap.gfx_ip_minor == 4);
  CHECK(cap.gfx_ip_stepping == 3);
  CHECK(cap.user_queue_ip_mask == 0);
  CHECK(cap.userq_eop_size == 0);
  CHECK(cap.userq_sdma_csa_size == 0);
  int32_t r = 0;
  CHECK(h.bo_create(4096, RVGL_DOMAIN_DOORBELL, 0, 0, &r) == 0);
  CHECK(r == -ENODEV);
  auto data = h.mapped_bo(64 * 1024);
  REQUIRE(h.va_map(data.bo, 0, 0, cap.va_start, data.size) == 0);
  for (uint32_t ip : {RVGL_IP_COMPUTE, RVGL_IP_SDMA}) {
    rvgl_req_queue_create q{};
    q.kind = RVGL_QUEUE_KIND_USER;
    q.ip = ip;
    q.ring_idx = 1;
    q.queue_va = cap.va_start;
    q.queue_size = 4096;
    q.rptr_va = cap.va_start + 4096;
    q.wptr_va = cap.va_start + 8192;
    q.eop_va = cap.va_start + 12288;
    q.doorbell_bo = data.bo;
    CHECK(h.call<rvgl_rsp_queue_create>(RVGL_CMD_QUEUE_CREATE, q).hdr.result == -ENODEV);
  }
  // -ENODEV whatever else is wrong (PROTOCOL.md §2): a ring another queue holds answered -EBUSY.
  h.queue_create(RVGL_IP_COMPUTE, 1, &r);
  REQUIRE(r == 0);
  rvgl_req_queue_create taken{};
  taken.kind = RVGL_QUEUE_KIND_USER;
  taken.ip = RVGL_IP_COMPUTE;
  taken.ring_idx = 1;
  CHECK(h.call<rvgl_rsp_queue_create>(RVGL_CMD_QUEUE_CREATE, taken).hdr.result == -ENODEV);
  CHECK(h.ctx().stats().queues == 1);
}

TEST_CASE("doorbell objects are held to their own byte quota", "[context][userq]") {
  // They come from the device's doorbell aperture, which every process of the host shares: with
  // no byte quota a guest could take all of it (16384 objects of any size). Found by an audit.
  Config c = test_config();
  c.limits.max_doorbell_bytes = 3 * 4096;
  ContextHarness h(c);
  h.create_shmem();
  if (!(h.capset().features & RVGL_FEATURE_USER_QUEUES)) return;
  int32_t r = 0;
  const uint32_t a = h.bo_create(2 * 4096, RVGL_DOMAIN_DOORBELL, 0, 0, &r);
  REQUIRE(r == 0);
  h.bo_create(2 * 4096, RVGL_DOMAIN_DOORBELL, 0, 0, &r);
  CHECK(r == -ENOSPC);
  h.bo_create(4096, RVGL_DOMAIN_DOORBELL, 0, 0, &r);
  CHECK(r == 0);
  h.bo_create(4096, RVGL_DOMAIN_DOORBELL, 0, 0, &r);
  CHECK(r == -ENOSPC);
  REQUIRE(h.bo_free(a) == 0);  // its bytes come back
  h.bo_create(2 * 4096, RVGL_DOMAIN_DOORBELL, 0, 0, &r);
  CHECK(r == 0);
}

TEST_CASE("doorbell objects of all contexts together are held to the process's quota",
          "[context][userq]") {
  // Each context within its own quota, all of them past the process's: refused. Found by an
  // audit (128 contexts x 248 KiB is more than a device's doorbell aperture).
  Config c = test_config();
  c.limits.max_doorbell_bytes = 3 * 4096;
  c.limits.max_process_doorbell_bytes = 4 * 4096;
  ContextHarness a(c, false, 1);
  ContextHarness b(c, false, 2);
  a.create_shmem();
  b.create_shmem();
  if (!(a.capset().features & RVGL_FEATURE_USER_QUEUES)) return;
  const uint64_t before = Usage::process_doorbell_bytes();
  REQUIRE(before == 0);  // no other context of the test program holds one now
  int32_t r = 0;
  const uint32_t in_a = a.bo_create(2 * 4096, RVGL_DOMAIN_DOORBELL, 0, 0, &r);
  REQUIRE(r == 0);
  const uint32_t in_b = b.bo_create(2 * 4096, RVGL_DOMAIN_DOORBELL, 0, 0, &r);
  REQUIRE(r == 0);
  CHECK(Usage::process_doorbell_bytes() == 4 * 4096);
  a.bo_create(4096, RVGL_DOMAIN_DOORBELL, 0, 0, &r);  // a's own quota has room
  CHECK(r == -ENOSPC);
  CHECK(Usage::process_doorbell_bytes() == 4 * 4096);
  REQUIRE(b.bo_free(in_b) == 0);  // b's bytes come back to every context
  CHECK(Usage::process_doorbell_bytes() == 2 * 4096);
  const uint32_t more = a.bo_create(4096, RVGL_DOMAIN_DOORBELL, 0, 0, &r);
  CHECK(r == 0);
  CHECK(Usage::process_doorbell_bytes() == 3 * 4096);
  REQUIRE(a.bo_free(more) == 0);
  REQUIRE(a.bo_free(in_a) == 0);
  CHECK(Usage::process_doorbell_bytes() == 0);
}

TEST_CASE("detaching guest pages waits until no user queue's engine can see them",
          "[context][userq][release]") {
  if (!profile_is("gfx1100")) return;
  // The page-table update of an unmap runs after the GEM_VA has returned (a job of the VM's own,
  // then a TLB flush; the emulator takes 300 ms here), and nothing orders a user queue's work
  // after it: until then the engine still writes through the old mapping. The guest reuses the
  // pages once the VMM's detach returns, so the detach must wait for the update.
  ScopedKnob update("RVGL_EMU_VM_UPDATE_US", "300000", "0");
  ScopedKnob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "30000", "2000");  // the gate waits that long
  REQUIRE((update.ok() && lockup.ok()));
  // Pages still mapped at the detach; pages the guest unmapped first (VA_UNMAP).
  const bool unmapped_first = GENERATE(false, true);
  constexpr uint32_t kPageValue = 0x5a5a5a5a;
  constexpr uint64_t kPageWord = 8192;
  for (int round = 0; round < 3; ++round) {
    INFO("unmapped first " << unmapped_first << " round " << round);
    GuestPages pages(64 * 1024);  // outlives the context, as the VMM's guest RAM does
    Guest g;
    int err = 0;
    const uint32_t res = userptr_blob(g.h, pages, &err);
    REQUIRE(err == 0);
    const uint64_t pages_va = g.va0 + 8 * kMiB;
    REQUIRE(g.h.va_map(0, res, 0, pages_va, pages.bytes) == 0);
    uint32_t q = 0;
    REQUIRE(g.create(g.request(RVGL_IP_SDMA, 2), &q) == 0);
    // Waits at a gate (data[0]), then writes a marker (data[16]) and a word of the guest pages.
    std::vector<uint32_t> pkt;
    pk::sdma_poll_mem_equal(pkt, g.data_va(), 1, 0xffffffffu);
    pk::sdma_write_linear(pkt, g.data_va() + 64, {1});
    pk::sdma_write_linear(pkt, pages_va + kPageWord, {kPageValue});
    g.put(0, pkt);
    g.ring_doorbell(pkt.size() * 4);
    if (unmapped_first) REQUIRE(g.h.va_unmap(pages_va, pages.bytes) == 0);
    g.h.ctx().detach_resource(res);
    __atomic_store_n(g.data.ptr<uint32_t>(), 1u, __ATOMIC_RELEASE);
    REQUIRE(eventually(
        [&] { return __atomic_load_n(g.data.ptr<uint32_t>() + 16, __ATOMIC_ACQUIRE) == 1; }));
    // The engine's next packet is the write into the pages: it faults, or lands right away.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(__atomic_load_n(reinterpret_cast<uint32_t *>(pages.ptr(kPageWord)), __ATOMIC_ACQUIRE) ==
          0);
  }
}

TEST_CASE("an unmap of guest pages the kernel cannot add a point to is made and counted",
          "[context][userq][release]") {
  if (!profile_is("gfx1100")) return;
  // The kernel allocates the point's chain node before the operation, and refuses the whole
  // GEM_VA if it cannot: the pages must still be unmapped, and the context says that no detach
  // can wait for that update.
  GuestPages pages(4096);
  Guest g;
  int err = 0;
  const uint32_t res = userptr_blob(g.h, pages, &err);
  REQUIRE(err == 0);
  const uint64_t va = g.va0 + 8 * kMiB;
  REQUIRE(g.h.va_map(0, res, 0, va, 4096) == 0);
  REQUIRE(g.h.va_map(0, res, 0, va + kMiB, 4096) == 0);
  REQUIRE(g.h.va_unmap(va + kMiB, 4096) == 0);  // tracked
  CHECK(g.h.ctx().stats().vm_updates_untracked == 0);
  {
    ScopedKnob refuse("RVGL_EMU_FAIL", "GEM_VA:1:ENOMEM", "");
    REQUIRE(refuse.ok());
    REQUIRE(g.h.va_unmap(va, 4096) == 0);
  }
  CHECK(g.h.ctx().stats().vm_updates_untracked == 1);
  CHECK(g.h.ctx().stats().va_mappings == 5);  // the queue's objects only
  // The address is free again: the unmap was made.
  CHECK(g.h.va_map(0, res, 0, va, 4096) == 0);
  g.h.ctx().detach_resource(res);
}
