#include <catch2/catch.hpp>

#include <cerrno>
#include <vector>

#include "context/shmem_view.h"
#include "rvgl_shared_page.h"
#include "support/guarded_shmem.h"

using namespace rvgl::guest;

namespace {

std::vector<uint8_t> host_response(int32_t result, uint32_t seqno, size_t size, uint8_t fill) {
  std::vector<uint8_t> r(size, fill);
  const rvgl_rsp_hdr h{result, seqno};
  std::memcpy(r.data(), &h, sizeof(h));
  return r;
}

}  // namespace

TEST_CASE("the page layout the host wrote is checked", "[guest][shmem]") {
  rvgl::test::GuardedShmem mem;
  rvgl::ShmemView host(mem.base(), RVGL_SHMEM_SIZE);
  SharedPage page(mem.base(), RVGL_SHMEM_SIZE);

  CHECK(page.validate_layout().code() == -EPROTO);  // not initialised: fill pattern
  host.init_header();
  CHECK(page.validate_layout().ok());

  auto *h = host.header();
  SECTION("layout version") {
    h->layout_version = 2;
  }
  SECTION("response area offset") {
    h->rsp_area_offset = 4096;
  }
  SECTION("response area size") {
    h->rsp_area_size = RVGL_SHMEM_SIZE;
  }
  SECTION("event ring offset") {
    h->event_ring_offset = 0;
  }
  SECTION("event ring entries") {
    h->event_ring_entries = 4096;
  }
  auto s = page.validate_layout();
  CHECK(s.code() == -EPROTO);
  CHECK_FALSE(s.error().message.empty());

  CHECK_FALSE(SharedPage(mem.base(), 4096).validate_layout().ok());
  CHECK_FALSE(SharedPage().validate_layout().ok());
}

TEST_CASE("a response is complete only when its slot carries its seqno", "[guest][shmem]") {
  rvgl::test::GuardedShmem mem;
  rvgl::ShmemView host(mem.base(), RVGL_SHMEM_SIZE);
  SharedPage page(mem.base(), RVGL_SHMEM_SIZE);
  const ResponseTicket t{RVGL_CMD_BO_CREATE, 77, 64, sizeof(rvgl_rsp_bo_create)};

  // An earlier, longer response at a lower offset left bytes that read as seqno 77 in our slot.
  auto stale = host_response(0, 3, 128, 0);
  const uint32_t fake = 77;
  std::memcpy(stale.data() + 64 + 4, &fake, 4);
  REQUIRE(host.write_response(0, stale));
  CHECK(page.arrived(t));  // the trap the guest must avoid
  page.prepare(t);
  CHECK_FALSE(page.arrived(t));
  CHECK(page.read(t).code() == -EAGAIN);

  auto rsp = host_response(-ENOSPC, 77, sizeof(rvgl_rsp_bo_create), 0);
  const uint32_t bo = 12;
  std::memcpy(rsp.data() + 8, &bo, 4);
  REQUIRE(host.write_response(64, rsp));
  REQUIRE(page.arrived(t));
  auto r = page.read(t);
  REQUIRE(r);
  CHECK(r->result == -ENOSPC);
  CHECK(r->seqno == 77);
  CHECK(r->cmd == RVGL_CMD_BO_CREATE);
  CHECK(r->size == sizeof(rvgl_rsp_bo_create));
  CHECK(r->as<rvgl_rsp_bo_create>().bo == 12);
  // Bytes past the response's size read as zero in the copy.
  CHECK(r->as<rvgl_rsp_query_info>().data.raw[50] == 0);

  host.publish_seqno(77);
  host.bump_async_error();
  CHECK(page.last_seqno() == 77);
  CHECK(page.async_error() == 0xa5a5a5a5u + 1);
}

TEST_CASE("forged tickets never read outside the response area", "[guest][shmem]") {
  rvgl::test::GuardedShmem mem;  // inaccessible pages on both sides: a stray read would crash
  SharedPage page(mem.base(), RVGL_SHMEM_SIZE);
  const ResponseTicket bad[] = {
      {1, 1, RVGL_RSP_AREA_SIZE - 8, 16},  // runs past the end
      {1, 1, 0xfffffff8u, 16},             // offset + size wraps 32 bits
      {1, 1, 12, 8},                       // misaligned
      {1, 1, 0, 4},                        // shorter than a header
      {1, 1, 0, 4096},                     // larger than any response
      {1, 1, RVGL_RSP_NONE, 8},            // no slot at all
  };
  for (const auto &t : bad) {
    INFO("rsp_off " << t.rsp_off << " size " << t.rsp_size);
    CHECK_FALSE(page.arrived(t));
    CHECK_FALSE(page.read(t).ok());
    page.prepare(t);  // ignored
  }
  CHECK(mem.changed(0, RVGL_SHMEM_SIZE) == 0);
  // The last valid slot works.
  const ResponseTicket last{1, 9, RVGL_RSP_AREA_SIZE - 128, 128};
  page.prepare(last);
  CHECK_FALSE(page.arrived(last));
}
