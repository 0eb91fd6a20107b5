// The second workload of the sweeps (fault_sweep.h, alloc_sweep.h): the paths the first does
// not take. A userptr blob of scattered pages of a sealed memfd (udmabuf, falling back to the
// alias, then to one object per range), a user queue (USERQ, its doorbell object's mapping, the
// health owner's looks at it) copying from that blob, and an SPM stream into a userptr destination
// (PROFILER on the SPM worker, the host buffer copied into guest pages, the SPM ring's fence).
#include <fcntl.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "robustness/sweep_workloads.h"
#include "spm/spm_reaper.h"
#include "support/guest_ram.h"

namespace rvgl::test::sweep {

namespace pk = rvgl::packets;

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint32_t kCtxId = 78;
// 16 scattered pages: more ranges than are stitched (8), few enough that udmabuf is cheaper than
// the alias by the importer's cost model (userptr_import.h).
constexpr uint32_t kBlobPages = 16;
constexpr uint64_t kBlobBytes = kBlobPages * kPage;
constexpr uint64_t kSpmBytes = 8 * kPage;
constexpr uint32_t kSpmRing = 7;
constexpr uint32_t kUserqRing = 2;
constexpr uint32_t kBell = 3;         // the user queue's doorbell index in its doorbell object
constexpr uint32_t kMarker = 0x5eed;  // the user queue's SDMA fence value, written after the copy
constexpr int kWorkDeadlineMs = 5000;

// Guest RAM as QEMU's memory-backend-memfd holds it: sealed against shrinking (udmabuf's rule).
struct SealedRam : GuestPages {
  explicit SealedRam(uint64_t bytes) : GuestPages(bytes) {
    if (fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK)) throw std::runtime_error("test: seal memfd");
  }
  uint8_t *page(uint64_t i) const { return ptr(i * kPage); }
};

class DevicesGuest final : public SweepGuest {
 public:
  explicit DevicesGuest(bool async) : SweepGuest(async, kCtxId) {}

 private:
  // Guest pages: the scattered blob's pages are the even ones of [0, 2 * kBlobPages), in a fixed
  // shuffled order; the SPM destination is the contiguous pages after them.
  static constexpr uint64_t kSpmFirstPage = 2 * kBlobPages;

  // A userptr blob over `iov`; 0 when refused (told).
  uint32_t create_userptr(ContextHarness &h, std::span<const iovec> iov, const char *what) {
    int err = 0;
    const uint32_t res_id = userptr_blob(h, iov, &err);
    return failed(what, err) ? 0 : res_id;
  }

  // SPM_SET_DEST into a response slot of its own; waits for its answer from the SPM worker.
  int32_t spm_set_dest(ContextHarness &h, uint32_t res_id, uint64_t size) {
    rvgl_req_spm_set_dest r{};
    r.res_id = res_id;
    r.size = size;
    const uint32_t seqno = h.next_seqno();
    const uint32_t off = RVGL_RSP_AREA_SIZE - 64;  // away from the harness's rotating slots
    r.hdr = {RVGL_CMD_SPM_SET_DEST, sizeof(r), seqno, off};
    if (int err = h.ctx().submit_cmd({reinterpret_cast<const uint8_t *>(&r), sizeof(r)}))
      throw std::runtime_error("test: SET_DEST not taken: " + std::to_string(err));
    rvgl_rsp_spm_set_dest rsp{};
    const bool answered = wait_for(
        [&] {
          std::memcpy(&rsp, h.shmem() + RVGL_RSP_AREA_OFFSET + off, sizeof(rsp));
          return __atomic_load_n(&rsp.hdr.seqno, __ATOMIC_ACQUIRE) == seqno;
        },
        kWorkDeadlineMs);
    if (!answered) throw std::runtime_error("SPM_SET_DEST never answered");
    return rsp.hdr.result;
  }

  void run_guest() override {
    SealedRam ram(kSpmFirstPage * kPage + kSpmBytes);
    for (uint64_t i = 0; i < 2 * kBlobPages * kPage / 4; ++i)
      reinterpret_cast<uint32_t *>(ram.ptr())[i] = static_cast<uint32_t>(i * 7 + 3);
    std::vector<uint32_t> order(kBlobPages);
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin(), order.end(), std::mt19937(11));
    std::vector<iovec> blob_iov;
    for (const uint32_t i : order)
      blob_iov.push_back({ram.page(2 * i), kPage});
    const iovec spm_iov{ram.page(kSpmFirstPage), kSpmBytes};

    // A released SPM is finished on the reaper's thread, which holds its session's descriptors
    // until then: drained before the run ends (after the context is gone, this being declared
    // first), so what a run leaves is never caught half-finished, by the sweep's baseline either.
    struct DrainSpmAtEnd {
      ~DrainSpmAtEnd() { SpmReaper::instance().drain(); }
    } drain_spm_at_end;
    std::optional<ContextHarness> ctx;
    bool ok = false;
    ContextHarness *opened = open_context(ctx, &ok);
    if (!opened) return;
    ContextHarness &h = *opened;
    const uint64_t va = h.capset().va_start;
    // The user queue's objects (PROTOCOL.md "User queues"), the copy's destination.
    std::optional<ContextHarness::HostBuffer> dst, ring, rptr, wptr, csa, bell;
    for (auto *b : {&dst, &ring, &rptr, &wptr, &csa})
      if (ok) ok = (*b = mapped_bo(h, b == &dst ? kBlobBytes : kPage)).has_value();
    if (ok) ok = (bell = mapped_bo(h, kPage, RVGL_DOMAIN_DOORBELL)).has_value();
    const PageHolders before_blobs = PageHolders::now(ram.fd.get());
    const uint32_t blob = ok ? create_userptr(h, blob_iov, "udmabuf blob") : 0;
    ok = blob != 0;
    const uint32_t spm_dest = ok ? create_userptr(h, {&spm_iov, 1}, "SPM blob") : 0;
    ok = spm_dest != 0;

    const uint64_t dst_va = va, blob_va = va + kMiB, ring_va = va + 2 * kMiB;
    const uint64_t rptr_va = va + 3 * kMiB, wptr_va = va + 4 * kMiB, csa_va = va + 5 * kMiB;
    const bool mapped =
        ok && !failed("VA_MAP dst", h.va_map(dst->bo, 0, 0, dst_va, kBlobBytes)) &&
        !failed("VA_MAP blob", h.va_map(0, blob, 0, blob_va, kBlobBytes, RVGL_VA_FLAG_READ)) &&
        !failed("VA_MAP ring", h.va_map(ring->bo, 0, 0, ring_va, kPage, RVGL_VA_FLAG_READ)) &&
        !failed("VA_MAP rptr", h.va_map(rptr->bo, 0, 0, rptr_va, kPage)) &&
        !failed("VA_MAP wptr", h.va_map(wptr->bo, 0, 0, wptr_va, kPage, RVGL_VA_FLAG_READ)) &&
        !failed("VA_MAP csa", h.va_map(csa->bo, 0, 0, csa_va, kPage));
    ok = mapped;

    uint32_t userq = 0;
    if (ok) {
      rvgl_req_queue_create q{};
      q.kind = RVGL_QUEUE_KIND_USER;
      q.ip = RVGL_IP_SDMA;
      q.ring_idx = kUserqRing;
      q.queue_va = ring_va;
      q.queue_size = kPage;
      q.rptr_va = rptr_va;
      q.wptr_va = wptr_va;
      q.eop_va = csa_va + kPage - h.capset().userq_sdma_csa_size;
      q.doorbell_bo = bell->bo;
      q.doorbell_offset = kBell;
      const auto rsp = h.call<rvgl_rsp_queue_create>(RVGL_CMD_QUEUE_CREATE, q);
      ok = !failed("QUEUE_CREATE user SDMA", rsp.hdr.result);
      userq = ok ? rsp.queue : 0;
    }
    if (ok) {
      // The blob in its order into dst, then a fence value after it, as the kernel's SDMA rings
      // publish work: the ring's bytes, the write pointer, the doorbell (SDMA counts bytes).
      std::vector<uint32_t> pkt;
      pk::sdma_copy_linear(pkt, dst_va, blob_va, kBlobBytes - 64);
      pk::sdma_fence(pkt, dst_va + kBlobBytes - 16, kMarker);
      std::memcpy(ring->ptr(), pkt.data(), pkt.size() * 4);
      const uint64_t w = pkt.size() * 4;
      __atomic_store_n(wptr->ptr<uint64_t>(), w, __ATOMIC_RELEASE);
      __atomic_store_n(bell->ptr<uint64_t>() + kBell, w, __ATOMIC_RELEASE);
    }

    // SPM: a stream into the userptr destination, stopped (which retires it into the guest's
    // pages), then a fence on the SPM ring.
    bool spm_held = false, streamed = false;
    if (ok) {
      rvgl_req_spm_acquire r{};
      r.ring_idx = kSpmRing;
      spm_held =
          !failed("SPM_ACQUIRE", h.call<rvgl_rsp_spm_acquire>(RVGL_CMD_SPM_ACQUIRE, r).hdr.result);
      ok = spm_held;
    }
    if (ok) ok = !failed("SPM_SET_DEST", spm_set_dest(h, spm_dest, kSpmBytes));
    if (ok) streamed = ok = !failed("SPM_SET_DEST stop", spm_set_dest(h, 0, 0));

    // Made whatever happened before, once there is a context (an unbound ring retires as ring 0).
    ok = fences(h, {{kSpmRing, 1, 0}}) && ok;
    bool copied = false;
    if (userq)
      copied = wait_for([&] { return dst->ptr<uint32_t>()[kBlobBytes / 4 - 4] == kMarker; },
                        kWorkDeadlineMs);
    ok = queues_ok(h, {userq}) && ok;
    ok = no_events(h) && ok;
    if (ok && !copied) o_.unretired.push_back("the user queue's copy never ended, queue OK");
    if (ok && copied && streamed) {
      bool same = true;
      for (uint32_t i = 0; i < kBlobPages; ++i) {
        const uint64_t n = i + 1 < kBlobPages ? kPage : kPage - 64;
        same = same && std::memcmp(dst->ptr() + i * kPage, ram.page(2 * order[i]), n) == 0;
      }
      rvgl_spm_buffer_header hdr;
      std::memcpy(&hdr, ram.page(kSpmFirstPage), sizeof(hdr));
      o_.data_ok = same && hdr.version >> 24 == 1;
    }

    // Teardown through the guest's own requests, then the VMM's detach and the context's end.
    if (spm_held) {
      rvgl_req_spm_release r{};
      failed("SPM_RELEASE", h.call<rvgl_rsp_spm_release>(RVGL_CMD_SPM_RELEASE, r).hdr.result);
    }
    if (userq) failed("QUEUE_DESTROY", h.queue_destroy(userq));
    if (mapped) failed("VA_UNMAP", h.va_unmap(blob_va, kBlobBytes));
    if (blob) h.detach(blob);
    if (spm_dest) h.detach(spm_dest);
    pages_released(before_blobs, ram.fd.get(), "the blobs' detach");
  }
};

}  // namespace

std::unique_ptr<SweepGuest> devices_guest(bool async) {
  return std::make_unique<DevicesGuest>(async);
}

// The udmabuf import, the user queue, the SPM; with udmabuf refused, its one (refused) call.
const MustCall kDeviceCalls = {"UDMABUF_CREATE_LIST", "PRIME_FD_TO_HANDLE", "USERQ", "PROFILER"};
const MustCall kAliasCalls = {"UDMABUF_CREATE_LIST", "USERQ", "PROFILER"};

}  // namespace rvgl::test::sweep
