// A guest's set-up meeting allocations that fail: the shared page, a BO_CREATE with a blob id
// and the blob's claim each either happen whole or leave nothing, so the guest, told -ENOMEM,
// can simply ask again. Half made, the shared page was kept though the guest never got it (every
// later try refused), and a blob id stayed taken with no object to claim (-EEXIST, -ENOENT).
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdint>

#include "robustness/alloc_failure.h"
#include "robustness/robust_support.h"

using namespace rvgl;
using namespace rvgl::test;

namespace {

constexpr uint64_t kBlobId = 5;
constexpr uint64_t kSize = 8192;

int32_t claim(ContextHarness &h, uint32_t res) {
  BlobExport e;
  return h.create_blob(res, RVGL_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_MAPPABLE, kBlobId, kSize, &e);
}

}  // namespace

TEST_CASE("a shared page refused for want of memory can be made again", "[alloc][setup]") {
  uint64_t refused = 0;
  for (uint64_t nth = 1;; ++nth) {
    INFO("allocation " << nth << " refused");
    ContextHarness h(test_config(), false, 1);
    uint32_t res = 0;
    int r;
    alloc::Tally t;
    {
      alloc::Armed refusing(nth, false);
      r = h.try_create_shmem(&res);
      t = refusing.tally();
    }
    if (t.failed == 0) {
      REQUIRE(r == 0);
      break;
    }
    ++refused;
    REQUIRE(r == -ENOMEM);
    REQUIRE(h.try_create_shmem(&res) == 0);
    rvgl_req_nop nop{};
    CHECK(h.call<rvgl_rsp_nop>(RVGL_CMD_NOP, nop).hdr.result == 0);  // the guest's page answers
  }
  CHECK(refused > 0);  // otherwise this proved nothing
}

TEST_CASE("a BO_CREATE or claim refused for want of memory can be asked again", "[alloc][setup]") {
  uint64_t refused = 0;
  for (uint64_t nth = 1;; ++nth) {
    INFO("allocation " << nth << " refused");
    ContextHarness h(test_config(), false, 1);
    h.create_shmem();
    const uint32_t res = h.next_res_id();
    int32_t created, claimed = -1;
    alloc::Tally t;
    {
      alloc::Armed refusing(nth, false);
      h.bo_create(kSize, RVGL_DOMAIN_GTT, 0, kBlobId, &created);
      if (created == 0) claimed = claim(h, res);
      t = refusing.tally();
    }
    if (t.failed == 0) {
      REQUIRE(created == 0);
      REQUIRE(claimed == 0);
      break;
    }
    ++refused;
    if (created != 0) {
      REQUIRE(created == -ENOMEM);
      h.bo_create(kSize, RVGL_DOMAIN_GTT, 0, kBlobId, &created);
      REQUIRE(created == 0);  // the id is free: nothing of the refused one kept it
    } else {
      REQUIRE(claimed == -ENOMEM);
    }
    REQUIRE(claim(h, res) == 0);  // the object is still there to claim
    rvgl_req_query_info q{};
    q.query = RVGL_INFO_USAGE;
    const auto u = h.call<rvgl_rsp_query_info>(RVGL_CMD_QUERY_INFO, q);
    REQUIRE(u.hdr.result == 0);
    CHECK(u.data.usage.objects == 1);  // and only it: the refused one holds nothing
    CHECK(u.data.usage.gtt_bytes == kSize);
  }
  CHECK(refused > 0);
}
