// The packet subset each engine decodes, encoded as the public headers define them (nvd.h,
// soc15d.h, sdma_v6_0_0_pkt_open.h): every packet must do exactly what it names.
#include <catch2/catch.hpp>

#include "emu_test_support.h"
#include "unmapped_memory.h"

using namespace rvgl::emu_test;

namespace {

struct Engine {
  Fd fd = open_render();
  GpuBuffer ibs, mem;
  uint32_t ctx = 0;
  Engine() {
    REQUIRE(fd.get() >= 0);
    REQUIRE(ibs.create(fd.get(), 64 * 1024, 0xa000000) == 0);
    REQUIRE(mem.create(fd.get(), 256 * 1024, 0xb000000) == 0);
    REQUIRE(ctx_create(fd.get(), &ctx) == 0);
  }
  int run(uint32_t ip, const std::vector<uint32_t> &ib, uint32_t at = 0) {
    uint64_t seq = 0;
    if (int r = submit(fd.get(), ctx, ip, 0, place_ib(ibs, at, ib), ib.size() * 4, &seq)) return r;
    return wait_cs(fd.get(), ctx, ip, 0, seq, abs_timeout_ms(5000));
  }
  uint32_t &word(size_t byte_offset) const { return mem.u32()[byte_offset / 4]; }
};

}  // namespace

TEST_CASE("SDMA packets", "[packets]") {
  Engine e;
  const uint64_t m = e.mem.va;
  SECTION("WRITE_UNTILED writes its dwords; FENCE its value; TRAP and NOP do nothing") {
    std::vector<uint32_t> ib;
    sdma::nop(ib);
    sdma::write(ib, m + 64, {1, 2, 3, 4});
    sdma::trap(ib);
    sdma::fence(ib, m + 128, 0xf00d);
    REQUIRE(e.run(AMDGPU_HW_IP_DMA, ib) == 0);
    CHECK(e.word(64) == 1);
    CHECK(e.word(76) == 4);
    CHECK(e.word(128) == 0xf00d);
  }
  SECTION("COPY_LINEAR copies exactly count + 1 bytes, overlapping or not") {
    for (int i = 0; i < 1024; ++i)
      e.mem.u8()[i] = static_cast<uint8_t>(i * 7);
    e.mem.u8()[4096 + 300] = 0xee;
    std::vector<uint32_t> ib;
    sdma::copy_linear(ib, m + 4096, m, 300);
    REQUIRE(e.run(AMDGPU_HW_IP_DMA, ib) == 0);
    CHECK(std::memcmp(e.mem.u8() + 4096, e.mem.u8(), 300) == 0);
    CHECK(e.mem.u8()[4096 + 300] == 0xee);
  }
  SECTION("CONST_FILL by bytes and dwords") {
    std::vector<uint32_t> ib;
    sdma::const_fill(ib, m + 8192, 0xaabbccddu, 64);
    ib.insert(ib.end(),
              {sdma::header(11), uint32_t(m + 9000), uint32_t((m + 9000) >> 32), 0x42, 9});
    REQUIRE(e.run(AMDGPU_HW_IP_DMA, ib) == 0);
    CHECK(e.word(8192) == 0xaabbccddu);
    CHECK(e.word(8192 + 60) == 0xaabbccddu);
    CHECK(e.word(8192 + 64) == 0);
    CHECK(e.mem.u8()[9000] == 0x42);
    CHECK(e.mem.u8()[9009] == 0x42);
    CHECK(e.mem.u8()[9010] == 0);
  }
  SECTION("POLL_REGMEM waits for memory; TIMESTAMP writes the GPU clock") {
    e.word(12288) = 0;
    std::vector<uint32_t> ib;
    sdma::poll_mem_equal(ib, m + 12288, 5);
    ib.insert(ib.end(), {sdma::header(13, 1), uint32_t(m + 12296), uint32_t((m + 12296) >> 32)});
    uint64_t seq = 0;
    REQUIRE(submit(e.fd.get(), e.ctx, AMDGPU_HW_IP_DMA, 0, place_ib(e.ibs, 0, ib), ib.size() * 4,
                   &seq) == 0);
    CHECK(wait_cs(e.fd.get(), e.ctx, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(30)) == 1);
    e.word(12288) = 5;
    CHECK(wait_cs(e.fd.get(), e.ctx, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == 0);
    uint64_t ts;
    std::memcpy(&ts, e.mem.u8() + 12296, 8);
    uint64_t now = 0;
    REQUIRE(query_info(e.fd.get(), AMDGPU_INFO_TIMESTAMP, &now, 8) == 0);
    CHECK(ts > 0);
    CHECK(ts <= now);
  }
  SECTION("a truncated packet fails the job") {
    std::vector<uint32_t> ib{sdma::header(1), 100, 0};  // COPY_LINEAR needs 7 dwords
    CHECK(e.run(AMDGPU_HW_IP_DMA, ib) == -ETIME);
  }
}

TEST_CASE("PM4 packets", "[packets]") {
  Engine e;
  const uint64_t m = e.mem.va;
  SECTION("NOP forms, EVENT_WRITE and ACQUIRE_MEM pass; DMA_DATA copies and fills") {
    for (int i = 0; i < 256; ++i)
      e.mem.u8()[i] = static_cast<uint8_t>(255 - i);
    std::vector<uint32_t> ib;
    pm4::nop1(ib);
    ib.push_back(0x80000000u);                                     // type-2 filler
    ib.insert(ib.end(), {pm4::packet3(0x10, 2), 0xdead, 0xbeef});  // NOP with a body
    pm4::event_write(ib);
    ib.insert(ib.end(), {pm4::packet3(0x58, 7), 0, 0, 0, 0, 0, 0, 0});  // ACQUIRE_MEM
    pm4::dma_data_copy(ib, m + 4096, m, 256);
    // DMA_DATA with SRC_SEL DATA: fill 64 bytes with the dword.
    ib.insert(ib.end(), {pm4::packet3(0x50, 6), 2u << 29, 0x12345678, 0, uint32_t(m + 8192),
                         uint32_t((m + 8192) >> 32), 64});
    REQUIRE(e.run(AMDGPU_HW_IP_COMPUTE, ib) == 0);
    CHECK(std::memcmp(e.mem.u8() + 4096, e.mem.u8(), 256) == 0);
    CHECK(e.word(8192) == 0x12345678);
    CHECK(e.word(8192 + 60) == 0x12345678);
    CHECK(e.word(8192 + 64) == 0);
  }
  SECTION("INDIRECT_BUFFER calls an IB2 and returns; CHAIN continues elsewhere") {
    std::vector<uint32_t> ib2;
    pm4::write_data(ib2, m + 100 * 4, {0x2222});
    const uint64_t ib2_va = place_ib(e.ibs, 4096, ib2);
    std::vector<uint32_t> chained;
    pm4::write_data(chained, m + 102 * 4, {0x4444});
    const uint64_t chained_va = place_ib(e.ibs, 8192, chained);
    std::vector<uint32_t> ib;
    pm4::write_data(ib, m + 99 * 4, {0x1111});
    pm4::indirect_buffer(ib, ib2_va, static_cast<uint32_t>(ib2.size()), false);
    pm4::write_data(ib, m + 101 * 4, {0x3333});
    pm4::indirect_buffer(ib, chained_va, static_cast<uint32_t>(chained.size()), true);
    pm4::write_data(ib, m + 103 * 4, {0x5555});  // skipped: the chain never returns
    REQUIRE(e.run(AMDGPU_HW_IP_COMPUTE, ib) == 0);
    CHECK(e.word(99 * 4) == 0x1111);
    CHECK(e.word(100 * 4) == 0x2222);
    CHECK(e.word(101 * 4) == 0x3333);
    CHECK(e.word(102 * 4) == 0x4444);
    CHECK(e.word(103 * 4) == 0);
  }
  SECTION("an IB2 cannot call another IB") {
    std::vector<uint32_t> inner;
    pm4::nop1(inner);
    const uint64_t inner_va = place_ib(e.ibs, 12288, inner);
    std::vector<uint32_t> ib2;
    pm4::indirect_buffer(ib2, inner_va, 1, false);
    const uint64_t ib2_va = place_ib(e.ibs, 4096, ib2);
    std::vector<uint32_t> ib;
    pm4::indirect_buffer(ib, ib2_va, static_cast<uint32_t>(ib2.size()), false);
    CHECK(e.run(AMDGPU_HW_IP_COMPUTE, ib) == -ETIME);
  }
  SECTION("WAIT_REG_MEM polls memory until the condition holds") {
    e.word(16384) = 0;
    std::vector<uint32_t> ib;
    // FUNCTION 3 (==), MEM_SPACE 1; then a write that shows the wait ended.
    ib.insert(ib.end(), {pm4::packet3(0x3c, 6), 3u | (1u << 4), uint32_t(m + 16384),
                         uint32_t((m + 16384) >> 32), 9, 0xffffffffu, 4});
    pm4::write_data(ib, m + 16388, {1});
    uint64_t seq = 0;
    REQUIRE(submit(e.fd.get(), e.ctx, AMDGPU_HW_IP_COMPUTE, 0, place_ib(e.ibs, 0, ib),
                   ib.size() * 4, &seq) == 0);
    CHECK(wait_cs(e.fd.get(), e.ctx, AMDGPU_HW_IP_COMPUTE, 0, seq, abs_timeout_ms(30)) == 1);
    CHECK(e.word(16388) == 0);
    e.word(16384) = 9;
    CHECK(wait_cs(e.fd.get(), e.ctx, AMDGPU_HW_IP_COMPUTE, 0, seq, abs_timeout_ms(5000)) == 0);
    CHECK(e.word(16388) == 1);
  }
  SECTION("a WAIT_REG_MEM that never comes true is a hang") {
    Knob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "100", "2000");
    e.word(16384) = 0;
    std::vector<uint32_t> ib{pm4::packet3(0x3c, 6),
                             3u | (1u << 4),
                             uint32_t(m + 16384),
                             uint32_t((m + 16384) >> 32),
                             1,
                             0xffffffffu,
                             4};
    CHECK(e.run(AMDGPU_HW_IP_COMPUTE, ib) == -ETIME);
    CHECK((ctx_state2(e.fd.get(), e.ctx) & AMDGPU_CTX_QUERY2_FLAGS_GUILTY) != 0);
  }
}

TEST_CASE("user fences, BO lists and GEM_WAIT_IDLE", "[packets]") {
  Engine e;
  Knob latency("RVGL_EMU_JOB_LATENCY_US", "30000", "0");
  std::vector<uint32_t> ib;
  sdma::fence(ib, e.mem.va, 1);
  drm_amdgpu_bo_list_entry entries[1] = {{e.mem.handle, 0}};
  drm_amdgpu_bo_list list{};
  list.in.operation = AMDGPU_BO_LIST_OP_CREATE;
  list.in.bo_number = 1;
  list.in.bo_info_size = sizeof(entries[0]);
  list.in.bo_info_ptr = reinterpret_cast<uintptr_t>(entries);
  REQUIRE(xioctl(e.fd.get(), DRM_IOCTL_AMDGPU_BO_LIST, &list) == 0);
  const uint32_t list_handle = list.out.list_handle;
  // amdgpu_cs_p1_user_fence(): the fence object is exactly one page, the 8 bytes inside it.
  GpuBuffer page;
  REQUIRE(page.create(e.fd.get(), 4096, 0xc000000) == 0);
  uint64_t seq = 0;
  for (const drm_amdgpu_cs_chunk_fence bad :
       {drm_amdgpu_cs_chunk_fence{e.mem.handle, 0}, drm_amdgpu_cs_chunk_fence{page.handle, 4089},
        drm_amdgpu_cs_chunk_fence{999, 0}}) {
    std::vector<drm_amdgpu_cs_chunk> c{
        {AMDGPU_CHUNK_ID_FENCE, sizeof(bad) / 4, reinterpret_cast<uintptr_t>(&bad)}};
    CHECK(submit(e.fd.get(), e.ctx, AMDGPU_HW_IP_DMA, 0, place_ib(e.ibs, 0, ib), ib.size() * 4,
                 &seq, c, list_handle) == -EINVAL);
  }
  drm_amdgpu_cs_chunk_fence uf{page.handle, 4088};
  std::vector<drm_amdgpu_cs_chunk> chunks{
      {AMDGPU_CHUNK_ID_FENCE, sizeof(uf) / 4, reinterpret_cast<uintptr_t>(&uf)}};
  REQUIRE(submit(e.fd.get(), e.ctx, AMDGPU_HW_IP_DMA, 0, place_ib(e.ibs, 0, ib), ib.size() * 4,
                 &seq, chunks, list_handle) == 0);
  drm_amdgpu_gem_wait_idle w{};
  w.in.handle = e.mem.handle;
  w.in.timeout = 0;
  REQUIRE(xioctl(e.fd.get(), DRM_IOCTL_AMDGPU_GEM_WAIT_IDLE, &w) == 0);
  CHECK(w.out.status == 1);  // busy: the listed job has not run
  w = {};
  w.in.handle = e.mem.handle;
  w.in.timeout = abs_timeout_ms(5000);
  REQUIRE(xioctl(e.fd.get(), DRM_IOCTL_AMDGPU_GEM_WAIT_IDLE, &w) == 0);
  CHECK(w.out.status == 0);
  CHECK(w.out.domain == AMDGPU_GEM_DOMAIN_GTT);
  uint64_t user_fence;
  std::memcpy(&user_fence, page.u8() + 4088, 8);
  CHECK(user_fence == seq);
  // A BO_LIST handle and a BO_HANDLES chunk together are refused; so is an unknown list.
  drm_amdgpu_bo_list_in in{};
  in.bo_number = 1;
  in.bo_info_size = sizeof(entries[0]);
  in.bo_info_ptr = reinterpret_cast<uintptr_t>(entries);
  std::vector<drm_amdgpu_cs_chunk> both{
      {AMDGPU_CHUNK_ID_BO_HANDLES, sizeof(in) / 4, reinterpret_cast<uintptr_t>(&in)}};
  CHECK(submit(e.fd.get(), e.ctx, AMDGPU_HW_IP_DMA, 0, e.ibs.va, 16, &seq, both, list_handle) ==
        -EINVAL);
  CHECK(submit(e.fd.get(), e.ctx, AMDGPU_HW_IP_DMA, 0, e.ibs.va, 16, &seq, {}, 77) == -ENOENT);
  // At most AMDGPU_BO_LIST_MAX_ENTRIES (128 Ki) entries, refused before any is read; up to it
  // the array is read (here from an address with nothing there).
  in.bo_info_ptr = reinterpret_cast<uintptr_t>(never_mapped());
  in.bo_number = 128 * 1024 + 1;
  CHECK(submit(e.fd.get(), e.ctx, AMDGPU_HW_IP_DMA, 0, e.ibs.va, 16, &seq, both) == -EINVAL);
  in.bo_number = 128 * 1024;
  CHECK(submit(e.fd.get(), e.ctx, AMDGPU_HW_IP_DMA, 0, e.ibs.va, 16, &seq, both) == -EFAULT);
  in.bo_info_ptr = reinterpret_cast<uintptr_t>(entries);
  in.bo_number = 1;
  entries[0].bo_handle = 999;
  CHECK(submit(e.fd.get(), e.ctx, AMDGPU_HW_IP_DMA, 0, e.ibs.va, 16, &seq, both) == -ENOENT);
  CHECK(submit(e.fd.get(), e.ctx, AMDGPU_HW_IP_DMA, 99, e.ibs.va, 16, &seq) == -EINVAL);  // ring
  CHECK(submit(e.fd.get(), 1234, AMDGPU_HW_IP_DMA, 0, e.ibs.va, 16, &seq) == -EINVAL);    // ctx
}

TEST_CASE("GEM_OP and GEM_METADATA keep what userspace attached", "[packets]") {
  Fd fd = open_render();
  uint32_t h = 0;
  REQUIRE(gem_create(fd.get(), 12345, AMDGPU_GEM_DOMAIN_VRAM | AMDGPU_GEM_DOMAIN_GTT,
                     AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED, &h) == 0);
  drm_amdgpu_gem_create_in info{};
  drm_amdgpu_gem_op op{h, AMDGPU_GEM_OP_GET_GEM_CREATE_INFO, reinterpret_cast<uintptr_t>(&info)};
  REQUIRE(xioctl(fd.get(), DRM_IOCTL_AMDGPU_GEM_OP, &op) == 0);
  CHECK(info.bo_size == 16384);  // rounded up to pages
  CHECK(info.domains == (AMDGPU_GEM_DOMAIN_VRAM | AMDGPU_GEM_DOMAIN_GTT));
  CHECK(info.domain_flags == AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED);
  op = {h, AMDGPU_GEM_OP_SET_PLACEMENT, AMDGPU_GEM_DOMAIN_GTT};
  REQUIRE(xioctl(fd.get(), DRM_IOCTL_AMDGPU_GEM_OP, &op) == 0);
  op = {h, AMDGPU_GEM_OP_GET_GEM_CREATE_INFO, reinterpret_cast<uintptr_t>(&info)};
  REQUIRE(xioctl(fd.get(), DRM_IOCTL_AMDGPU_GEM_OP, &op) == 0);
  CHECK(info.domains == AMDGPU_GEM_DOMAIN_GTT);
  op = {h, 42, 0};
  CHECK(xioctl(fd.get(), DRM_IOCTL_AMDGPU_GEM_OP, &op) == -EINVAL);

  drm_amdgpu_gem_metadata md{};
  md.handle = h;
  md.op = AMDGPU_GEM_METADATA_OP_SET_METADATA;
  md.data.tiling_info = 0x1234;
  md.data.data_size_bytes = 8;
  md.data.data[0] = 7;
  md.data.data[1] = 9;
  REQUIRE(xioctl(fd.get(), DRM_IOCTL_AMDGPU_GEM_METADATA, &md) == 0);
  md = {};
  md.handle = h;
  md.op = AMDGPU_GEM_METADATA_OP_GET_METADATA;
  REQUIRE(xioctl(fd.get(), DRM_IOCTL_AMDGPU_GEM_METADATA, &md) == 0);
  CHECK(md.data.tiling_info == 0x1234);
  CHECK(md.data.data_size_bytes == 8);
  CHECK(md.data.data[1] == 9);
  md.op = AMDGPU_GEM_METADATA_OP_SET_METADATA;
  md.data.data_size_bytes = 1000;
  CHECK(xioctl(fd.get(), DRM_IOCTL_AMDGPU_GEM_METADATA, &md) == -EINVAL);
}

TEST_CASE("threads may share files and devices", "[packets][threads]") {
  Fd fd = open_render();
  constexpr int kThreads = 4, kJobs = 20;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      Fd own = open_render();  // half the threads share `fd`, half use their own file
      const int f = (t % 2) ? own.get() : fd.get();
      GpuBuffer buf;
      if (buf.create(f, 64 * 1024, 0xc000000 + uint64_t(t) * 0x100000) != 0) {
        ++failures;
        return;
      }
      uint32_t ctx = 0;
      if (ctx_create(f, &ctx)) ++failures;
      for (int j = 0; j < kJobs; ++j) {
        std::vector<uint32_t> ib;
        sdma::const_fill(ib, buf.va + 4096, uint32_t(j + 1) * 0x01010101u, 4096);
        sdma::fence(ib, buf.va + 8192, uint32_t(j + 1));
        uint64_t seq = 0;
        const uint32_t ring = uint32_t(t) % 2;  // both profiles have two SDMA rings or more
        if (submit(f, ctx, AMDGPU_HW_IP_DMA, ring, place_ib(buf, 512 * (j % 8), ib), ib.size() * 4,
                   &seq) ||
            wait_cs(f, ctx, AMDGPU_HW_IP_DMA, ring, seq, abs_timeout_ms(5000)) != 0 ||
            buf.u32()[2048] != uint32_t(j + 1))
          ++failures;
      }
      ctx_free(f, ctx);
    });
  for (auto &th : threads)
    th.join();
  CHECK(failures == 0);
}
