// A SUBMIT meeting allocations that fail: either the guest is told -ENOMEM and nothing ran, or
// the job ran and the host counts it. A job the host does not know it submitted is one it would
// not wait for before handing guest pages back (docs/robustness.md, promise 7), and whose fences
// would retire before it ends.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "robustness/alloc_failure.h"
#include "robustness/robust_support.h"

using namespace rvgl;
using namespace rvgl::test;
namespace pk = rvgl::packets;

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint32_t kRing = 1;
// More than a std::deque of (seq, handle) holds in its first block (512 bytes: 32 jobs), where a
// submission's record once allocated after the kernel had taken the job.
constexpr uint32_t kJobs = 80;
constexpr uint32_t kSlots = 16;  // attempts per job at most

}  // namespace

TEST_CASE("a SUBMIT out of memory either ran nothing or is counted", "[alloc][submit]") {
  for (const bool async : {false, true}) {
    INFO((async ? "async callbacks" : "poll mode"));
    ContextHarness h(test_config(), async, 1);
    h.create_shmem();
    const uint64_t va = h.capset().va_start;
    constexpr uint64_t kBytes = 2 * kPage;  // kJobs x kSlots dwords, and as many 32-byte IBs / 4
    static_assert(kJobs * kSlots * 4 <= kBytes);
    auto data = h.mapped_bo(kBytes);
    auto ib = h.mapped_bo(kJobs * kSlots * 32);
    REQUIRE(h.va_map(data.bo, 0, 0, va, kBytes) == 0);
    REQUIRE(h.va_map(ib.bo, 0, 0, va + (1 << 24), kJobs * kSlots * 32) == 0);
    int32_t r;
    const uint32_t queue = h.queue_create(RVGL_IP_COMPUTE, kRing, &r);
    REQUIRE(r == 0);
    uint64_t counted = 0;  // jobs the host says it submitted
    uint64_t refusals = 0;
    std::vector<uint64_t> ran_at(kJobs);  // the attempt the host counted, per job
    for (uint32_t i = 0; i < kJobs; ++i) {
      // Each allocation the SUBMIT makes fails in turn, the ones after the CS included, until
      // one makes fewer: then it must have been submitted, and only then. Each attempt writes
      // a slot of its own, so an attempt answered -ENOMEM that ran anyway shows.
      for (uint64_t nth = 1;; ++nth) {
        INFO("job " << i << ", allocation " << nth << " refused");
        REQUIRE(nth < kSlots);
        std::vector<uint32_t> dw;
        pk::pm4_write_data(dw, va + (i * kSlots + nth) * 4, {0x1000 + i});
        const rvgl_ib job =
            ContextHarness::write_ib(ib, va + (1 << 24), dw, (i * kSlots + nth) * 32);
        alloc::Armed refusing(nth, false);
        const uint64_t seq = h.submit(queue, {job}, {}, &r);
        const alloc::Tally t = refusing.tally();
        REQUIRE(h.queue_state(queue).last_submitted_seq == counted + (r == 0));
        if (r == 0) {
          REQUIRE(seq == ++counted);
          REQUIRE(t.failed == 0);  // one refused would have been answered -ENOMEM
          ran_at[i] = nth;
          break;
        }
        REQUIRE(r == -ENOMEM);
        REQUIRE(t.failed == 1);
        ++refusals;
      }
    }
    CHECK(counted == kJobs);
    CHECK(refusals >= kJobs);  // each SUBMIT allocates: otherwise this proved nothing
    // Everything counted has ended once its fence retires, each job once.
    REQUIRE(h.fence(kRing, 1) == 0);
    REQUIRE(h.wait_fence(kRing, 1));
    for (uint32_t i = 0; i < kJobs; ++i)
      for (uint32_t slot = 1; slot < kSlots; ++slot) {
        INFO("job " << i << ", attempt " << slot);
        CHECK(data.ptr<uint32_t>()[i * kSlots + slot] == (slot == ran_at[i] ? 0x1000 + i : 0));
      }
    const auto st = h.queue_state(queue);
    CHECK(st.state == RVGL_QUEUE_STATE_OK);
    CHECK(st.last_completed_seq == counted);
  }
}
