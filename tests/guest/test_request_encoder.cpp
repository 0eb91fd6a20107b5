// Every guest encoder against the host's own FrameDecoder: the bytes must frame correctly and
// parse into the fields that were meant.
#include <catch2/catch.hpp>

#include <cerrno>
#include <numeric>

#include "host_recorder.h"
#include "rvgl_request_encoder.h"
#include "rvgl_shared_page.h"
#include "support/guarded_shmem.h"

using namespace rvgl::guest;
using rvgl::guest::test::HostRecorder;
using rvgl::guest::test::RecordedRequest;

namespace {

struct Host {
  rvgl::test::GuardedShmem page;
  rvgl::ShmemView view{page.base(), RVGL_SHMEM_SIZE};
  rvgl::CommandTable table = HostRecorder::table();
  HostRecorder rec;
  rvgl::FrameDecoder dec{table, &rec, 1u << 20};

  rvgl::SubmitOutcome run(const RequestEncoder &enc) { return dec.run(enc.bytes(), view); }
};

// Frames as the host sees them: walks the headers, checking each len.
std::vector<rvgl_req_hdr> frames(std::span<const uint8_t> b) {
  std::vector<rvgl_req_hdr> out;
  size_t pos = 0;
  while (pos + sizeof(rvgl_req_hdr) <= b.size()) {
    rvgl_req_hdr h;
    std::memcpy(&h, b.data() + pos, sizeof(h));
    out.push_back(h);
    if (h.len < sizeof(h)) break;
    pos += h.len;
  }
  return out;
}

}  // namespace

TEST_CASE("every v1 request parses on the host into the intended fields", "[guest][encoder]") {
  Host host;
  RequestSequencer seq;
  RequestEncoder enc(seq);

  BoCreateArgs bo{.size = 0x200000,
                  .alignment = 0x10000,
                  .domain = RVGL_DOMAIN_VRAM,
                  .flags = RVGL_BO_FLAG_CPU_ACCESS,
                  .blob_id = 0x1122334455667788ull};
  VaMapArgs map{.object = ObjectRef::resource(42),
                .offset = 0x3000,
                .va = 0x7000'0000'0000ull,
                .size = 0x5000,
                .flags = RVGL_VA_FLAG_READ | RVGL_VA_FLAG_WRITE};
  KernelQueueArgs kq{.ip = RVGL_IP_SDMA, .priority = RVGL_PRIORITY_HIGH, .ring_idx = 7};
  UserQueueArgs uq{.ip = RVGL_IP_COMPUTE,
                   .priority = RVGL_PRIORITY_LOW,
                   .ring_idx = 62,
                   .queue_va = 0x1000'0000,
                   .queue_size = 4096,
                   .rptr_va = 0x2000'0008,
                   .wptr_va = 0x2000'0010,
                   .eop_va = 0x3000'0000,
                   .doorbell_bo = 9,
                   .doorbell_offset = 17};
  const rvgl_ib ibs[] = {{0xabc000, 256, 0}, {0xdef000, 64, 0}};
  const rvgl_wait waits[] = {{3, 0, 0x1'0000'0001ull}};
  SpmSetDestArgs spm{.xcp = 1,
                     .object = ObjectRef::handle(5),
                     .timeout_ms = 250,
                     .offset = 0x40,
                     .size = 0xffffffe0ull};

  std::vector<ResponseTicket> t;
  t.push_back(*enc.nop());
  t.push_back(*enc.query_info(RVGL_INFO_USAGE));
  t.push_back(*enc.bo_create(bo));
  t.push_back(*enc.bo_free(11));
  t.push_back(*enc.va_map(map));
  t.push_back(*enc.va_unmap(0x7000'0000'0000ull, 0x5000));
  t.push_back(*enc.queue_create(kq));
  t.push_back(*enc.queue_create(uq));
  t.push_back(*enc.queue_destroy(4));
  t.push_back(*enc.submit(4, ibs, waits));
  t.push_back(*enc.queue_state(4));
  t.push_back(*enc.spm_acquire(1, 20));
  t.push_back(*enc.spm_release(1));
  t.push_back(*enc.spm_set_dest(spm));

  // Framing: lengths are the v1 sizes (SUBMIT with its arrays), multiples of 8, back to back.
  const auto hdrs = frames(enc.bytes());
  REQUIRE(hdrs.size() == t.size());
  size_t total = 0;
  for (size_t i = 0; i < hdrs.size(); ++i) {
    const auto *layout = rvgl::find_layout(hdrs[i].cmd);
    REQUIRE(layout);
    const uint32_t want = hdrs[i].cmd == RVGL_CMD_SUBMIT ? 32 + 16 * 2 + 16 * 1 : layout->req_size;
    CHECK(hdrs[i].len == want);
    CHECK(hdrs[i].len % 8 == 0);
    CHECK(hdrs[i].seqno == i + 1);
    CHECK(hdrs[i].rsp_off == t[i].rsp_off);
    CHECK(t[i].rsp_off % 8 == 0);
    CHECK(t[i].rsp_size == layout->rsp_size);
    CHECK(t[i].cmd == hdrs[i].cmd);
    total += hdrs[i].len;
  }
  CHECK(total == enc.size());
  CHECK(enc.first_seqno() == 1);
  CHECK(enc.last_seqno() == 14);
  // Response slots of one buffer do not overlap.
  for (size_t i = 1; i < t.size(); ++i)
    CHECK(t[i].rsp_off >= t[i - 1].rsp_off + t[i - 1].rsp_size);

  auto out = host.run(enc);
  REQUIRE(out.error == 0);
  REQUIRE(out.processed == 14);
  const auto &r = host.rec.requests;
  REQUIRE(r.size() == 14);

  CHECK(r[1].as<rvgl_req_query_info>().query == RVGL_INFO_USAGE);
  {
    auto q = r[2].as<rvgl_req_bo_create>();
    CHECK(q.size == bo.size);
    CHECK(q.alignment == bo.alignment);
    CHECK(q.domain == RVGL_DOMAIN_VRAM);
    CHECK(q.flags == RVGL_BO_FLAG_CPU_ACCESS);
    CHECK(q.blob_id == 0x1122334455667788ull);
  }
  CHECK(r[3].as<rvgl_req_bo_free>().bo == 11);
  {
    auto q = r[4].as<rvgl_req_va_map>();
    CHECK(q.bo == 0);
    CHECK(q.res_id == 42);
    CHECK(q.offset == 0x3000);
    CHECK(q.va == 0x7000'0000'0000ull);
    CHECK(q.size == 0x5000);
    CHECK(q.flags == (RVGL_VA_FLAG_READ | RVGL_VA_FLAG_WRITE));
    CHECK(q.pad == 0);
  }
  {
    auto q = r[5].as<rvgl_req_va_unmap>();
    CHECK(q.va == 0x7000'0000'0000ull);
    CHECK(q.size == 0x5000);
  }
  {
    auto q = r[6].as<rvgl_req_queue_create>();
    CHECK(q.kind == RVGL_QUEUE_KIND_KERNEL);
    CHECK(q.ip == RVGL_IP_SDMA);
    CHECK(q.priority == RVGL_PRIORITY_HIGH);
    CHECK(q.ring_idx == 7);
    CHECK(q.queue_va == 0);  // user-queue fields are zero for kernel queues
    CHECK(q.eop_va == 0);
    CHECK(q.doorbell_bo == 0);
  }
  {
    auto q = r[7].as<rvgl_req_queue_create>();
    CHECK(q.kind == RVGL_QUEUE_KIND_USER);
    CHECK(q.ip == RVGL_IP_COMPUTE);
    CHECK(q.priority == RVGL_PRIORITY_LOW);
    CHECK(q.ring_idx == 62);
    CHECK(q.queue_va == 0x1000'0000);
    CHECK(q.queue_size == 4096);
    CHECK(q.rptr_va == 0x2000'0008);
    CHECK(q.wptr_va == 0x2000'0010);
    CHECK(q.eop_va == 0x3000'0000);
    CHECK(q.doorbell_bo == 9);
    CHECK(q.doorbell_offset == 17);
  }
  CHECK(r[8].as<rvgl_req_queue_destroy>().queue == 4);
  {
    auto q = r[9].as<rvgl_req_submit>();
    CHECK(q.queue == 4);
    CHECK(q.flags == 0);
    CHECK(q.num_ibs == 2);
    CHECK(q.num_waits == 1);
    CHECK(r[9].wire_len == 80);
  }
  CHECK(r[10].as<rvgl_req_queue_state>().queue == 4);
  {
    auto q = r[11].as<rvgl_req_spm_acquire>();
    CHECK(q.xcp == 1);
    CHECK(q.ring_idx == 20);
  }
  CHECK(r[12].as<rvgl_req_spm_release>().xcp == 1);
  {
    auto q = r[13].as<rvgl_req_spm_set_dest>();
    CHECK(q.xcp == 1);
    CHECK(q.bo == 5);
    CHECK(q.res_id == 0);
    CHECK(q.timeout_ms == 250);
    CHECK(q.offset == 0x40);
    CHECK(q.size == 0xffffffe0ull);
  }
  for (const auto &q : r) {
    const auto *layout = rvgl::find_layout(q.cmd);
    CHECK(q.wire_len >= layout->req_size);  // never zero-extended: the guest sent every field
  }

  // The host's responses land where the guest looks for them.
  SharedPage page(host.page.base(), RVGL_SHMEM_SIZE);
  for (size_t i = 0; i < t.size(); ++i) {
    INFO("request " << i);
    REQUIRE(page.arrived(t[i]));
    auto rsp = page.read(t[i]);
    REQUIRE(rsp);
    CHECK(rsp->result == 0);
    CHECK(rsp->seqno == t[i].seqno);
    CHECK(rsp->size == t[i].rsp_size);
    if (rsp->size >= 12) CHECK(rsp->as<rvgl_rsp_submit>().seq == t[i].seqno);
  }
}

TEST_CASE("SUBMIT carries its IB and wait arrays right after the fixed part", "[guest][encoder]") {
  Host host;
  RequestSequencer seq;
  RequestEncoder enc(seq);
  std::vector<rvgl_ib> ibs;
  std::vector<rvgl_wait> waits;
  for (uint32_t i = 0; i < 5; ++i)
    ibs.push_back({0x100000ull * (i + 1), 4 * (i + 1), 0});
  for (uint32_t i = 0; i < 3; ++i)
    waits.push_back({i + 1, 0, 1000ull + i});

  auto with_arrays = enc.submit(8, ibs, waits);
  auto only_ibs = enc.submit(8, ibs);
  auto nothing = enc.submit(8, {}, {});
  REQUIRE(with_arrays);
  REQUIRE(only_ibs);
  REQUIRE(nothing);
  REQUIRE(host.run(enc).error == 0);
  const auto &r = host.rec.requests;
  REQUIRE(r.size() == 3);

  CHECK(r[0].wire_len == 32 + 5 * 16 + 3 * 16);
  for (uint32_t i = 0; i < 5; ++i) {
    rvgl_ib ib;
    std::memcpy(&ib, r[0].bytes.data() + 32 + 16 * i, sizeof(ib));
    CHECK(ib.va == 0x100000ull * (i + 1));
    CHECK(ib.size == 4 * (i + 1));
  }
  for (uint32_t i = 0; i < 3; ++i) {
    rvgl_wait w;
    std::memcpy(&w, r[0].bytes.data() + 32 + 5 * 16 + 16 * i, sizeof(w));
    CHECK(w.queue == i + 1);
    CHECK(w.seq == 1000ull + i);
  }
  CHECK(r[1].wire_len == 32 + 5 * 16);
  CHECK(r[1].as<rvgl_req_submit>().num_waits == 0);
  CHECK(r[2].wire_len == 32);
  CHECK(r[2].as<rvgl_req_submit>().num_ibs == 0);
}

TEST_CASE("a request without a response takes no slot", "[guest][encoder]") {
  Host host;
  host.view.header()->async_error = 0;
  RequestSequencer seq;
  RequestEncoder enc(seq);
  auto t = enc.bo_free(3, Reply::kNone);
  REQUIRE(t);
  CHECK_FALSE(t->has_response());
  CHECK(t->rsp_off == RVGL_RSP_NONE);
  CHECK(seq.slots().reserved_count() == 0);
  REQUIRE(host.run(enc).error == 0);
  CHECK(host.rec.requests.at(0).rsp_off == RVGL_RSP_NONE);
  CHECK(host.page.changed(8, RVGL_SHMEM_SIZE) == 0);  // nothing written but the header seqno
}

TEST_CASE("seqnos keep their order across 2^32 on the host", "[guest][encoder]") {
  Host host;
  // Walk the host's last seqno up to near the top in steps under 2^31, then wrap.
  for (uint32_t start : {0x7ffffff0u, 0xc0000000u, 0xfffffffdu}) {
    RequestSequencer seq(RVGL_RSP_AREA_SIZE, start);
    RequestEncoder enc(seq);
    for (int i = 0; i < 4; ++i)
      REQUIRE(enc.nop());
    auto out = host.run(enc);
    INFO("start " << start);
    REQUIRE(out.error == 0);
    CHECK(out.processed == 4);
  }
  const auto &r = host.rec.requests;
  REQUIRE(r.size() == 12);
  CHECK(r[8].seqno == 0xfffffffeu);
  CHECK(r[9].seqno == 0xffffffffu);
  CHECK(r[10].seqno == 1);
  CHECK(r[11].seqno == 2);
}

TEST_CASE("a full response area refuses requests without side effects", "[guest][encoder]") {
  RequestSequencer seq(256);
  RequestEncoder enc(seq);
  auto a = enc.query_info(RVGL_INFO_MEMORY);  // 128-byte responses
  auto b = enc.query_info(RVGL_INFO_MEMORY);
  REQUIRE(a);
  REQUIRE(b);
  const size_t size_before = enc.size();
  auto c = enc.query_info(RVGL_INFO_MEMORY);
  REQUIRE_FALSE(c);
  CHECK(c.code() == -ENOSPC);
  CHECK(enc.size() == size_before);
  CHECK(enc.tickets().size() == 2);
  // Requests without a response still go; the failed one used no seqno.
  auto d = enc.nop(Reply::kNone);
  REQUIRE(d);
  CHECK(d->seqno == b->seqno + 1);

  SECTION("a reclaimer that frees arrived slots makes room") {
    struct FreeAll : RequestSequencer::Reclaimer {
      int calls = 0;
      size_t reclaim(ResponseSlotAllocator &s) override {
        ++calls;
        return s.release_if([](const ResponseSlot &) { return true; });
      }
    } reclaimer;
    seq.set_reclaimer(&reclaimer);
    auto e = enc.query_info(RVGL_INFO_MEMORY);
    REQUIRE(e);
    CHECK(reclaimer.calls == 1);
    CHECK(e->rsp_off == 0);
    seq.set_reclaimer(nullptr);
  }
  SECTION("a reclaimer that first frees only a newer slot is asked again") {
    // The second response came in first (the session looked while the host was writing): that
    // frees no room in the ring until the oldest slot goes too.
    struct NewerFirst : RequestSequencer::Reclaimer {
      uint32_t oldest, newer;
      int calls = 0;
      size_t reclaim(ResponseSlotAllocator &s) override {
        const uint32_t seqno = ++calls == 1 ? newer : oldest;
        return s.release_if([&](const ResponseSlot &x) { return x.seqno == seqno; });
      }
    } reclaimer;
    reclaimer.oldest = a->seqno;
    reclaimer.newer = b->seqno;
    seq.set_reclaimer(&reclaimer);
    auto e = enc.query_info(RVGL_INFO_MEMORY);
    REQUIRE(e);
    CHECK(reclaimer.calls == 2);
    CHECK(e->rsp_off == 0);
    seq.set_reclaimer(nullptr);
  }
}

TEST_CASE("slots of a buffer that was never submitted are given back", "[guest][encoder]") {
  RequestSequencer seq;
  {
    RequestEncoder enc(seq);
    REQUIRE(enc.nop());
    REQUIRE(enc.query_info(1));
    CHECK(seq.slots().reserved_count() == 2);
  }
  CHECK(seq.slots().reserved_count() == 0);
  {
    RequestEncoder enc(seq);
    REQUIRE(enc.nop());
    RequestEncoder moved(std::move(enc));
    CHECK(seq.slots().reserved_count() == 1);
    moved.mark_submitted();
  }
  CHECK(seq.slots().reserved_count() == 1);  // in flight until its response arrives
}
