#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <vector>

#include "context/command_layouts.h"
#include "context/frame_decoder.h"
#include "support/guarded_shmem.h"
#include "support/stream_builder.h"

using rvgl::FrameError;
using rvgl::test::GuardedShmem;
using rvgl::test::StreamBuilder;

namespace {

// A stand-in context: records what reached the handlers.
struct Recorder {
  std::vector<uint32_t> seen;  // seqnos in dispatch order
  uint32_t last_query = 0xdead;
  uint32_t last_wire_len = 0;
  size_t last_bytes = 0;
  bool tail_was_zero = false;

  int32_t nop(const rvgl::Request &req, rvgl::Response &) {
    seen.push_back(req.seqno);
    return 0;
  }
  int32_t query(const rvgl::Request &req, rvgl::Response &rsp) {
    seen.push_back(req.seqno);
    const auto &q = req.as<rvgl_req_query_info>();
    last_query = q.query;
    last_wire_len = req.wire_len;
    last_bytes = req.bytes.size();
    tail_was_zero = q.pad == 0;
    auto &r = rsp.as<rvgl_rsp_query_info>();
    r.query = q.query;
    r.size = 1;
    r.data.raw[0] = 0x42;
    return 0;
  }
  int32_t failing(const rvgl::Request &req, rvgl::Response &) {
    seen.push_back(req.seqno);
    return -EIO;
  }
};

rvgl::CommandTable make_table() {
  rvgl::CommandTable t;
  auto add = [&](uint32_t cmd, rvgl::Handler h) {
    const auto *l = rvgl::find_layout(cmd);
    t.set(cmd, {l->name, h, l->req_size, l->rsp_size});
  };
  add(RVGL_CMD_NOP, rvgl::bind_handler<Recorder, &Recorder::nop>);
  add(RVGL_CMD_QUERY_INFO, rvgl::bind_handler<Recorder, &Recorder::query>);
  add(RVGL_CMD_BO_FREE, rvgl::bind_handler<Recorder, &Recorder::failing>);
  return t;
}

struct Fixture {
  GuardedShmem page;
  rvgl::ShmemView shmem{page.base(), RVGL_SHMEM_SIZE};
  rvgl::CommandTable table = make_table();
  Recorder rec;
  rvgl::FrameDecoder dec{table, &rec, 1u << 20};

  rvgl_rsp_hdr rsp_at(uint32_t off) const {
    rvgl_rsp_hdr h;
    std::memcpy(&h, page.rsp_area() + off, sizeof(h));
    return h;
  }
  uint32_t async_error() const { return shmem.header()->async_error; }
  // Bytes changed anywhere in the page except the header's seqno/async_error words.
  size_t changed_outside_header() const { return page.changed(8, RVGL_SHMEM_SIZE); }
};

rvgl_req_nop nop() {
  return {};
}
rvgl_req_query_info query(uint32_t q) {
  rvgl_req_query_info r{};
  r.query = q;
  return r;
}

// Checks the common outcome of every malformed frame: the submit fails with -EINVAL at the
// expected frame, async_error is bumped once, and nothing outside the header changed.
void expect_rejected(Fixture &f, const StreamBuilder &s, FrameError e, size_t at,
                     uint32_t processed_before = 0) {
  auto out = f.dec.run(s.span(), f.shmem);
  CHECK(out.error == -EINVAL);
  CHECK(out.frame_error == e);
  CHECK(out.error_offset == at);
  CHECK(out.processed == processed_before);
  CHECK(f.async_error() == 1);
}

}  // namespace

TEST_CASE("several requests in one buffer are dispatched in order", "[decoder]") {
  Fixture f;
  StreamBuilder s;
  s.add(nop(), RVGL_CMD_NOP, 1, 0)
      .add(query(RVGL_INFO_TIMESTAMP), RVGL_CMD_QUERY_INFO, 2, 8)
      .add(nop(), RVGL_CMD_NOP, 3, RVGL_RSP_NONE)
      .add(nop(), RVGL_CMD_NOP, 4, 136);
  auto out = f.dec.run(s.span(), f.shmem);
  REQUIRE(out.error == 0);
  CHECK(out.processed == 4);
  CHECK(f.rec.seen == std::vector<uint32_t>{1, 2, 3, 4});
  CHECK(f.shmem.header()->seqno == 4);
  CHECK(f.rsp_at(0).result == 0);
  CHECK(f.rsp_at(0).seqno == 1);
  CHECK(f.rsp_at(8).seqno == 2);
  rvgl_rsp_query_info q;
  std::memcpy(&q, f.page.rsp_area() + 8, sizeof(q));
  CHECK(q.query == RVGL_INFO_TIMESTAMP);
  CHECK(q.data.raw[0] == 0x42);
  CHECK(q.data.raw[1] == 0);  // built in a zeroed shadow, not left over from the page
  CHECK(f.rsp_at(136).seqno == 4);
  // Only the three response slots and the header changed.
  CHECK(f.page.changed(RVGL_RSP_AREA_OFFSET + 144, RVGL_SHMEM_SIZE) == 0);
  CHECK(f.page.changed(8, RVGL_RSP_AREA_OFFSET) == 0);
  CHECK(f.async_error() == 0xa5a5a5a5u);  // untouched: the fixture never initialised it
}

TEST_CASE("malformed frames fail the submit and write nothing", "[decoder]") {
  Fixture f;
  f.shmem.header()->async_error = 0;
  StreamBuilder s;

  SECTION("len 0") {
    s.raw({RVGL_CMD_NOP, 0, 1, 0});
    expect_rejected(f, s, FrameError::kLengthTooShort, 0);
  }
  SECTION("len shorter than the header") {
    s.raw({RVGL_CMD_NOP, 8, 1, 0});
    expect_rejected(f, s, FrameError::kLengthTooShort, 0);
  }
  SECTION("len past the end of the buffer") {
    s.raw({RVGL_CMD_NOP, 32, 1, 0});
    expect_rejected(f, s, FrameError::kLengthPastEnd, 0);
  }
  SECTION("len not a multiple of 8") {
    const uint8_t body[8] = {};
    s.raw({RVGL_CMD_NOP, 20, 1, 0}, body);
    expect_rejected(f, s, FrameError::kLengthUnaligned, 0);
  }
  SECTION("misaligned rsp_off") {
    s.add(nop(), RVGL_CMD_NOP, 1, 4);
    expect_rejected(f, s, FrameError::kRspUnaligned, 0);
  }
  SECTION("response running past the area") {
    // QUERY_INFO's response is 128 bytes: the last slot that fits starts at size - 128.
    s.add(query(1), RVGL_CMD_QUERY_INFO, 1, RVGL_RSP_AREA_SIZE - 120);
    expect_rejected(f, s, FrameError::kRspOutOfRange, 0);
  }
  SECTION("rsp_off so large that offset + size wraps 32 bits") {
    s.add(query(1), RVGL_CMD_QUERY_INFO, 1, 0xfffffff8u);
    expect_rejected(f, s, FrameError::kRspOutOfRange, 0);
  }
  SECTION("truncated last request, after a good one") {
    s.add(nop(), RVGL_CMD_NOP, 1, RVGL_RSP_NONE);
    const uint8_t half[8] = {RVGL_CMD_NOP, 0, 0, 0, 16, 0, 0, 0};
    s.bytes(half);
    expect_rejected(f, s, FrameError::kTruncatedHeader, 16, 1);
  }
  SECTION("seqno repeated") {
    s.add(nop(), RVGL_CMD_NOP, 5, RVGL_RSP_NONE).add(nop(), RVGL_CMD_NOP, 5, 0);
    expect_rejected(f, s, FrameError::kSeqnoOrder, 16, 1);
  }
  SECTION("seqno going backwards") {
    s.add(nop(), RVGL_CMD_NOP, 5, RVGL_RSP_NONE).add(nop(), RVGL_CMD_NOP, 4, 0);
    expect_rejected(f, s, FrameError::kSeqnoOrder, 16, 1);
  }
  SECTION("first seqno 0 is not after the initial 0") {
    s.add(nop(), RVGL_CMD_NOP, 0, 0);
    expect_rejected(f, s, FrameError::kSeqnoOrder, 0);
  }
  CHECK(f.changed_outside_header() == 0);
  // The bad frame's seqno was not published.
  CHECK(f.shmem.header()->seqno != 4);
}

TEST_CASE("seqnos may wrap around 2^32", "[decoder]") {
  Fixture f;
  StreamBuilder s;
  s.add(nop(), RVGL_CMD_NOP, 0x40000000u, RVGL_RSP_NONE)
      .add(nop(), RVGL_CMD_NOP, 0xa0000000u, RVGL_RSP_NONE);
  REQUIRE(f.dec.run(s.span(), f.shmem).error == 0);
  StreamBuilder s2;
  s2.add(nop(), RVGL_CMD_NOP, 0xfffffff0u, RVGL_RSP_NONE).add(nop(), RVGL_CMD_NOP, 3, 0);
  auto out = f.dec.run(s2.span(), f.shmem);
  CHECK(out.error == 0);
  CHECK(out.processed == 2);
  CHECK(f.shmem.header()->seqno == 3);
}

TEST_CASE("unknown commands answer -ENOSYS and the walk continues", "[decoder]") {
  Fixture f;
  StreamBuilder s;
  const uint8_t body[16] = {};
  s.raw({999, 32, 1, 0}, body)
      .raw({0, 16, 2, 8})
      .raw({RVGL_CMD_SPM_ACQUIRE, 24, 3, 16}, std::span(body, 8))  // known id, no handler yet
      .add(nop(), RVGL_CMD_NOP, 4, 24);
  auto out = f.dec.run(s.span(), f.shmem);
  REQUIRE(out.error == 0);
  CHECK(out.processed == 4);
  CHECK(f.rsp_at(0).result == -ENOSYS);
  CHECK(f.rsp_at(0).seqno == 1);
  CHECK(f.rsp_at(8).result == -ENOSYS);
  CHECK(f.rsp_at(16).result == -ENOSYS);
  CHECK(f.rsp_at(24).result == 0);
  CHECK(f.rec.seen == std::vector<uint32_t>{4});
  // -ENOSYS responses are header-only: the unknown command's size is not trusted.
  CHECK(f.page.changed(RVGL_RSP_AREA_OFFSET + 32, RVGL_SHMEM_SIZE) == 0);
}

TEST_CASE("short requests are zero-extended, long ones accepted", "[decoder]") {
  Fixture f;
  SECTION("a header-only QUERY_INFO reads query 0") {
    StreamBuilder s;
    s.raw({RVGL_CMD_QUERY_INFO, 16, 1, 0});
    REQUIRE(f.dec.run(s.span(), f.shmem).error == 0);
    CHECK(f.rec.last_query == 0);
    CHECK(f.rec.last_wire_len == 16);
    CHECK(f.rec.last_bytes == sizeof(rvgl_req_query_info));
    CHECK(f.rec.tail_was_zero);
  }
  SECTION("a longer request from a newer guest keeps its extra bytes") {
    StreamBuilder s;
    uint8_t body[24];
    std::memset(body, 0, sizeof(body));
    body[0] = RVGL_INFO_MEMORY;
    std::memset(body + 8, 0x77, 16);
    s.raw({RVGL_CMD_QUERY_INFO, 40, 1, 0}, body);
    REQUIRE(f.dec.run(s.span(), f.shmem).error == 0);
    CHECK(f.rec.last_query == RVGL_INFO_MEMORY);
    CHECK(f.rec.last_wire_len == 40);
    CHECK(f.rec.last_bytes == 40);
  }
  SECTION("a short request after a long one does not see the long one's bytes") {
    StreamBuilder s;
    uint8_t body[8];
    std::memset(body, 0xff, sizeof(body));
    s.raw({RVGL_CMD_QUERY_INFO, 24, 1, 0}, body).raw({RVGL_CMD_QUERY_INFO, 16, 2, 128});
    REQUIRE(f.dec.run(s.span(), f.shmem).error == 0);
    CHECK(f.rec.last_query == 0);
    CHECK(f.rec.tail_was_zero);
  }
}

TEST_CASE("failures without a response slot count as async errors", "[decoder]") {
  Fixture f;
  f.shmem.header()->async_error = 0;
  StreamBuilder s;
  rvgl_req_bo_free fr{};
  s.add(fr, RVGL_CMD_BO_FREE, 1, RVGL_RSP_NONE).add(fr, RVGL_CMD_BO_FREE, 2, 0);
  auto out = f.dec.run(s.span(), f.shmem);
  CHECK(out.error == 0);
  CHECK(f.async_error() == 1);
  CHECK(f.rsp_at(0).result == -EIO);
}

TEST_CASE("a buffer over the submit limit is refused whole", "[decoder]") {
  GuardedShmem page;
  rvgl::ShmemView shmem{page.base(), RVGL_SHMEM_SIZE};
  shmem.header()->async_error = 0;
  auto table = make_table();
  Recorder rec;
  rvgl::FrameDecoder dec{table, &rec, 32};
  StreamBuilder s;
  s.add(nop(), RVGL_CMD_NOP, 1, 0).add(nop(), RVGL_CMD_NOP, 2, 8).add(nop(), RVGL_CMD_NOP, 3, 16);
  auto out = dec.run(s.span(), shmem);
  CHECK(out.error == -EINVAL);
  CHECK(out.frame_error == FrameError::kTooLarge);
  CHECK(rec.seen.empty());
  CHECK(page.changed(8, RVGL_SHMEM_SIZE) == 0);
}

TEST_CASE("without a shared page only requests without response run", "[decoder]") {
  rvgl::ShmemView none;
  auto table = make_table();
  Recorder rec;
  rvgl::FrameDecoder dec{table, &rec, 1024};
  StreamBuilder s;
  s.add(nop(), RVGL_CMD_NOP, 1, RVGL_RSP_NONE).add(nop(), RVGL_CMD_NOP, 2, 0);
  auto out = dec.run(s.span(), none);
  CHECK(out.error == -EINVAL);
  CHECK(out.frame_error == FrameError::kNoSharedPage);
  CHECK(rec.seen == std::vector<uint32_t>{1});
}
