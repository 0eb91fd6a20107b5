// A blob the VMM asks for when memory runs out, at the C API: the router files a new blob in its
// table after the context made it, and a refusal there was undone by a detach, which does not
// unmake what the context's making took. The shared page stayed the context's (every later try
// -EINVAL) and a claimed blob id stayed off the parked list (-ENOENT). Each allocation of the
// call is refused in turn; the VMM, told ENOMEM, asks again and must get the blob.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdint>

#include "renderer_fixture.h"
#include "robustness/alloc_failure.h"
#include "rocm_guest.h"
#include "rocm_virgl_protocol.h"
#include "support/product_scope.h"

using namespace rvgl::hooks_test;
namespace alloc = rvgl::test::alloc;
using rvgl::test::ProductCall;

namespace {

constexpr uint64_t kSize = 64 * 1024;
constexpr uint64_t kBlobId = 7;

int create_blob(RocmGuest &g, uint32_t res, uint64_t blob_id, uint64_t size) {
  ProductCall pc("virgl_renderer_resource_create_blob");
  return g.create_blob(res, VIRGL_RENDERER_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_MAPPABLE, blob_id,
                       size);
}

}  // namespace

TEST_CASE("a blob the router could not file for want of memory can be asked for again",
          "[hooks][alloc]") {
  Renderer r(Renderer::Options{});
  REQUIRE(r.result() == 0);
  for (const bool shared_page : {true, false}) {
    uint64_t refused = 0;
    for (uint64_t nth = 1;; ++nth) {
      INFO((shared_page ? "shared page" : "claimed BO") << ", allocation " << nth << " refused");
      const uint32_t ctx = static_cast<uint32_t>(nth) + (shared_page ? 0 : 1000);
      RocmGuest g(ctx, ctx * 100);
      if (shared_page) {
        REQUIRE(virgl_renderer_context_create_with_flags(ctx, RVGL_CAPSET_ID, 4, "rocm") == 0);
      } else {
        g.start();
        g.bo_create(kSize, RVGL_DOMAIN_GTT, 0, kBlobId);
      }
      const uint64_t blob_id = shared_page ? RVGL_BLOB_ID_SHMEM : kBlobId;
      const uint64_t size = shared_page ? RVGL_SHMEM_SIZE : kSize;
      const uint32_t res = g.next_res_id(), again = g.next_res_id();
      int made;
      alloc::Tally t;
      {
        alloc::Armed refusing(nth, false);
        made = create_blob(g, res, blob_id, size);
        t = refusing.tally();
      }
      if (t.failed == 0) {
        REQUIRE(made == 0);
      } else {
        ++refused;
        REQUIRE(made == -ENOMEM);
        uint32_t info = 0;
        CHECK(virgl_renderer_resource_get_map_info(res, &info) == -EINVAL);  // not a resource
        // QEMU frees its record of a refused blob; the guest asks again under a new id.
        CHECK(create_blob(g, again, blob_id, size) == 0);
      }
      virgl_renderer_context_destroy(ctx);
      for (const uint32_t id : {res, again})
        virgl_renderer_resource_unref(id);
      if (t.failed == 0) break;
    }
    CHECK(refused > 0);  // otherwise this proved nothing
  }
}
