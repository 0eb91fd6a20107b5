// The first workload of the sweeps (fault_sweep.h, alloc_sweep.h): kernel queues, a BO and a
// userptr blob of one range, SDMA and PM4 work, fences on both rings, then teardown.
#include <sys/mman.h>
#include <unistd.h>

#include "robustness/sweep_workloads.h"

namespace rvgl::test::sweep {

namespace pk = rvgl::packets;

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint32_t kCtxId = 77;

// The scripted guest: shared page, two BOs, a userptr blob, SDMA copy userptr -> BO, PM4 write,
// fences on both queues' rings, then teardown. A failure the guest sees skips the rest of the
// work, but once there is a context the guest still makes its fences (a virtio guest's fenced
// EXECBUFFER makes one whatever its commands did) and tears down what it made.
class CopyGuest final : public SweepGuest {
 public:
  explicit CopyGuest(bool async) : SweepGuest(async, kCtxId) {}

 private:
  void run_guest() override {
    UniqueFd memfd(memfd_create("sweep-ram", MFD_CLOEXEC));
    if (!memfd || ftruncate(memfd.get(), 16 * kPage)) throw std::runtime_error("test: memfd");
    Mapping ram = Mapping::map_shared(memfd.get(), 16 * kPage, PROT_READ | PROT_WRITE);
    if (!ram.valid()) throw std::runtime_error("test: map guest RAM");
    for (uint32_t i = 0; i < 4 * kPage / 4; ++i)
      ram.as<uint32_t>()[i] = i * 3 + 1;

    std::optional<ContextHarness> ctx;
    bool ok = false;
    ContextHarness *opened = open_context(ctx, &ok);
    if (!opened) return;
    ContextHarness &h = *opened;
    const uint64_t va = h.capset().va_start;
    std::optional<ContextHarness::HostBuffer> dst, ib;
    if (ok) ok = (dst = mapped_bo(h, 4 * kPage)).has_value();
    if (ok) ok = (ib = mapped_bo(h, kPage)).has_value();
    const PageHolders before_blob = PageHolders::now(memfd.get());
    const uint32_t userptr_res = h.next_res_id();
    const iovec iov{ram.get(), 4 * kPage};
    BlobExport e;
    const bool userptr =
        ok && !failed("userptr create_blob",
                      h.create_blob(userptr_res, RVGL_BLOB_MEM_GUEST, RVGL_BLOB_FLAG_USERPTR, 0,
                                    4 * kPage, &e, {&iov, 1}));
    ok = userptr;

    int32_t r = 0;
    const bool mapped =
        ok && !failed("VA_MAP dst", h.va_map(dst->bo, 0, 0, va, 4 * kPage)) &&
        !failed("VA_MAP userptr", h.va_map(0, userptr_res, 0, va + (1 << 20), 4 * kPage)) &&
        !failed("VA_MAP ib", h.va_map(ib->bo, 0, 0, va + (2 << 20), kPage));
    ok = mapped;
    uint32_t sdma = 0, compute = 0;
    if (ok) {
      sdma = h.queue_create(RVGL_IP_SDMA, 1, &r);
      ok = !failed("QUEUE_CREATE sdma", r);
    }
    if (ok) {
      compute = h.queue_create(RVGL_IP_COMPUTE, 2, &r);
      ok = !failed("QUEUE_CREATE compute", r);
    }
    uint64_t sdma_seq = 0, compute_seq = 0;
    if (ok) {
      std::vector<uint32_t> copy;
      pk::sdma_copy_linear(copy, va, va + (1 << 20), 4 * kPage - 16);
      pk::sdma_pad(copy);
      sdma_seq = h.submit(sdma, {ContextHarness::write_ib(*ib, va + (2 << 20), copy)}, {}, &r);
      ok = !failed("SUBMIT sdma", r);
    }
    if (ok) {
      std::vector<uint32_t> w;
      pk::pm4_write_data(w, va + 4 * kPage - 16, {0xfeedu, 0xbeefu});
      compute_seq = h.submit(compute, {ContextHarness::write_ib(*ib, va + (2 << 20), w, 2048)},
                             {{sdma, 0, sdma_seq}}, &r);
      ok = !failed("SUBMIT compute", r);
    }

    // The fences, whatever happened before (once there is a context): ring 1 is the SDMA queue's,
    // ring 2 the compute queue's (an unbound ring retires as ring 0).
    ok = fences(h, {{1, 1, sdma_seq}, {2, 2, compute_seq}}) && ok;
    ok = queues_ok(h, {sdma, compute}) && ok;
    ok = no_events(h) && ok;
    if (ok)
      o_.data_ok = std::memcmp(dst->ptr(), ram.get(), 4 * kPage - 16) == 0 &&
                   dst->ptr<uint32_t>()[kPage - 4] == 0xfeedu;

    // Teardown through the guest's own requests, then the VMM's detach and the context's end.
    if (mapped) failed("VA_UNMAP", h.va_unmap(va, 4 * kPage));
    if (dst) failed("BO_FREE", h.bo_free(dst->bo));
    if (sdma) failed("QUEUE_DESTROY", h.queue_destroy(sdma));
    if (userptr) h.detach(userptr_res);
    pages_released(before_blob, memfd.get(), "the userptr blob's detach");
  }
};

}  // namespace

std::unique_ptr<SweepGuest> copy_guest(bool async) {
  return std::make_unique<CopyGuest>(async);
}

const MustCall kCopyCalls = {"CS", "GEM_USERPTR", "GEM_VA", "BO_LIST"};

}  // namespace rvgl::test::sweep
