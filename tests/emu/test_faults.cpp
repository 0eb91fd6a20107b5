// Acceptance: with RVGL_EMU_VM_FAULT_STOP=2 (amdgpu.vm_fault_stop=2) a copy from an unmapped VA
// fails its job, marks the context guilty and is reported through the VM fault query; a write into
// a read-only userptr faults.
#include <catch2/catch.hpp>
#include <array>

#include "emu_test_support.h"
#include "unmapped_memory.h"

using namespace rvgl::emu_test;

TEST_CASE("an access to an unmapped VA is a VM fault that blames the context",
          "[faults][acceptance]") {
  // About the stopping behaviour (amdgpu.vm_fault_stop=2); the default is
  // test_vm_fault_default.cpp.
  Knob stop("RVGL_EMU_VM_FAULT_STOP", "2", "0");
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  GpuBuffer buf;
  REQUIRE(buf.create(fd.get(), 64 * 1024, 0x1000000) == 0);
  uint32_t ctx = 0, other = 0;
  REQUIRE(ctx_create(fd.get(), &ctx) == 0);
  REQUIRE(ctx_create(fd.get(), &other) == 0);
  const auto before = counters();

  constexpr uint64_t kUnmapped = 0x7654321000ull + 0x40;
  std::vector<uint32_t> ib;
  sdma::copy_linear(ib, buf.va + 4096, kUnmapped, 4096);
  sdma::fence(ib, buf.va + 64, 0xabcd);  // never reached
  uint64_t seq = 0;
  REQUIRE(submit(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, place_ib(buf, 0, ib), ib.size() * 4, &seq) ==
          0);
  CHECK(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == -ETIME);
  CHECK(buf.u32()[16] == 0);

  const uint64_t flags = ctx_state2(fd.get(), ctx);
  CHECK((flags & AMDGPU_CTX_QUERY2_FLAGS_GUILTY) != 0);
  CHECK((flags & AMDGPU_CTX_QUERY2_FLAGS_RESET) != 0);
  const auto f = vm_fault(fd.get());
  CHECK(f.addr == (kUnmapped & ~0xfffull));
  CHECK((f.status & (1u << 8)) != 0);   // MAPPING_ERROR
  CHECK((f.status & (1u << 18)) == 0);  // a read
  CHECK(counters().vm_faults == before.vm_faults + 1);
  CHECK(counters().jobs_failed == before.jobs_failed + 1);

  // A guilty context takes no more work; another context of the same file hears of the GPU
  // reset that ended the job (amdgpu_ctx_query2() compares the device's reset counter) and
  // works on.
  CHECK(submit(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, buf.va, 4, &seq) == -ECANCELED);
  CHECK(ctx_state2(fd.get(), other) == AMDGPU_CTX_QUERY2_FLAGS_RESET);
  CHECK(counters().gpu_resets == before.gpu_resets + 1);
  std::vector<uint32_t> ok;
  sdma::fence(ok, buf.va + 64, 0x600d);
  REQUIRE(submit(fd.get(), other, AMDGPU_HW_IP_DMA, 0, place_ib(buf, 1024, ok), ok.size() * 4,
                 &seq) == 0);
  CHECK(wait_cs(fd.get(), other, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == 0);
  CHECK(buf.u32()[16] == 0x600d);
}

TEST_CASE("permissions of a mapping and of a read-only userptr are enforced",
          "[faults][acceptance]") {
  // About the stopping behaviour (amdgpu.vm_fault_stop=2); the default is
  // test_vm_fault_default.cpp.
  Knob stop("RVGL_EMU_VM_FAULT_STOP", "2", "0");
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  GpuBuffer ibbuf;
  REQUIRE(ibbuf.create(fd.get(), 16 * 1024, 0x2000000) == 0);
  uint32_t ctx = 0;
  REQUIRE(ctx_create(fd.get(), &ctx) == 0);

  void *mem = nullptr;
  REQUIRE(posix_memalign(&mem, 4096, 8192) == 0);
  std::memset(mem, 0x5a, 8192);

  SECTION("a write into a read-only userptr faults and leaves the pages alone") {
    uint32_t h = 0;
    REQUIRE(gem_userptr(fd.get(), mem, 8192,
                        AMDGPU_GEM_USERPTR_READONLY | AMDGPU_GEM_USERPTR_ANONONLY |
                            AMDGPU_GEM_USERPTR_VALIDATE | AMDGPU_GEM_USERPTR_REGISTER,
                        &h) == 0);
    constexpr uint64_t kVa = 0x3000000;
    REQUIRE(gem_va(fd.get(), AMDGPU_VA_OP_MAP, h, kVa, 0, 8192) == 0);
    std::vector<uint32_t> ib;
    sdma::const_fill(ib, kVa + 4096, 0, 64);
    uint64_t seq = 0;
    REQUIRE(submit(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, place_ib(ibbuf, 0, ib), ib.size() * 4,
                   &seq) == 0);
    CHECK(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == -ETIME);
    const auto f = vm_fault(fd.get());
    CHECK(f.addr == kVa + 4096);
    CHECK((f.status & (1u << 18)) != 0);  // a write
    CHECK((f.status & (1u << 8)) == 0);   // the page is mapped: a permission fault
    CHECK(static_cast<uint8_t *>(mem)[4096] == 0x5a);
    CHECK((ctx_state2(fd.get(), ctx) & AMDGPU_CTX_QUERY2_FLAGS_GUILTY) != 0);
    gem_close(fd.get(), h);
  }

  SECTION("reading a read-only userptr works, zero copy") {
    uint32_t h = 0;
    REQUIRE(gem_userptr(fd.get(), mem, 8192, AMDGPU_GEM_USERPTR_READONLY, &h) == 0);
    REQUIRE(gem_va(fd.get(), AMDGPU_VA_OP_MAP, h, 0x3000000, 0, 8192) == 0);
    static_cast<uint32_t *>(mem)[5] = 0x11223344;  // written after registration: same pages
    std::vector<uint32_t> ib;
    sdma::copy_linear(ib, ibbuf.va + 8192, 0x3000000 + 20, 4);
    uint64_t seq = 0;
    REQUIRE(submit(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, place_ib(ibbuf, 0, ib), ib.size() * 4,
                   &seq) == 0);
    CHECK(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == 0);
    CHECK(ibbuf.u32()[2048] == 0x11223344);
    gem_close(fd.get(), h);
  }

  SECTION("a mapping without WRITEABLE refuses writes; without READABLE, reads") {
    uint32_t h = 0;
    REQUIRE(gem_create(fd.get(), 8192, AMDGPU_GEM_DOMAIN_GTT, 0, &h) == 0);
    REQUIRE(gem_va(fd.get(), AMDGPU_VA_OP_MAP, h, 0x4000000, 0, 4096, AMDGPU_VM_PAGE_READABLE) ==
            0);
    REQUIRE(gem_va(fd.get(), AMDGPU_VA_OP_MAP, h, 0x4001000, 4096, 4096,
                   AMDGPU_VM_PAGE_WRITEABLE) == 0);
    std::vector<uint32_t> ib;
    sdma::fence(ib, 0x4000000, 1);
    uint64_t seq = 0;
    REQUIRE(submit(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, place_ib(ibbuf, 0, ib), ib.size() * 4,
                   &seq) == 0);
    CHECK(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == -ETIME);
    CHECK(vm_fault(fd.get()).addr == 0x4000000);
    uint32_t ctx2 = 0;
    REQUIRE(ctx_create(fd.get(), &ctx2) == 0);
    ib.clear();
    sdma::copy_linear(ib, ibbuf.va + 8192, 0x4001000, 4);
    REQUIRE(submit(fd.get(), ctx2, AMDGPU_HW_IP_DMA, 0, place_ib(ibbuf, 0, ib), ib.size() * 4,
                   &seq) == 0);
    CHECK(wait_cs(fd.get(), ctx2, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == -ETIME);
    CHECK(vm_fault(fd.get()).addr == 0x4001000);
    gem_close(fd.get(), h);
  }

  SECTION("an unknown packet fails the job instead of being skipped") {
    std::vector<uint32_t> ib{0x000000ffu};  // SDMA opcode 255
    uint64_t seq = 0;
    REQUIRE(submit(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, place_ib(ibbuf, 0, ib), 4, &seq) == 0);
    CHECK(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == -ETIME);
    uint32_t ctx2 = 0;
    REQUIRE(ctx_create(fd.get(), &ctx2) == 0);
    std::vector<uint32_t> pm4ib{pm4::packet3(0xee, 1), 0};  // PM4 opcode 0xee
    REQUIRE(submit(fd.get(), ctx2, AMDGPU_HW_IP_COMPUTE, 0, place_ib(ibbuf, 0, pm4ib), 8, &seq) ==
            0);
    CHECK(wait_cs(fd.get(), ctx2, AMDGPU_HW_IP_COMPUTE, 0, seq, abs_timeout_ms(5000)) == -ETIME);
  }

  SECTION("ANONONLY refuses file-backed pages, VALIDATE refuses unmapped ones") {
    char path[] = "/tmp/rvgl-emu-test-XXXXXX";
    const int tmp = mkstemp(path);
    REQUIRE(tmp >= 0);
    unlink(path);
    REQUIRE(ftruncate(tmp, 8192) == 0);
    void *file_pages = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, tmp, 0);
    REQUIRE(file_pages != MAP_FAILED);
    uint32_t h = 0;
    const uint32_t flags =
        AMDGPU_GEM_USERPTR_ANONONLY | AMDGPU_GEM_USERPTR_VALIDATE | AMDGPU_GEM_USERPTR_REGISTER;
    CHECK(gem_userptr(fd.get(), file_pages, 8192, flags, &h) == -EPERM);
    CHECK(gem_userptr(fd.get(), file_pages, 8192, flags & ~AMDGPU_GEM_USERPTR_ANONONLY, &h) == 0);
    gem_close(fd.get(), h);
    munmap(file_pages, 8192);
    close(tmp);
    const auto rcs = with_hole(3, 1, [&](uint8_t *region) {
      return std::array<int, 3>{
          gem_userptr(fd.get(), region, 3 * 4096, flags, &h),
          gem_userptr(fd.get(), region + 1, 4096, flags, &h),
          gem_userptr(fd.get(), region, 4096, AMDGPU_GEM_USERPTR_VALIDATE, &h)};
    });
    REQUIRE(rcs.has_value());
    CHECK((*rcs)[0] == -EFAULT);
    CHECK((*rcs)[1] == -EINVAL);
    CHECK((*rcs)[2] == -EACCES);
  }
  free(mem);
}

// amdgpu_cs_parser_bos(): every CS looks up the pages of each userptr object its BO list names
// (amdgpu_ttm_tt_get_user_pages(), hmm_range_fault() over the whole range) and fails with that
// answer; an object it does not list is not looked at.
TEST_CASE("every CS looks up the pages of the userptr objects it lists again",
          "[faults][userptr]") {
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  GpuBuffer ibbuf;
  REQUIRE(ibbuf.create(fd.get(), 16 * 1024, 0x2000000) == 0);
  uint32_t ctx = 0;
  REQUIRE(ctx_create(fd.get(), &ctx) == 0);
  std::vector<uint32_t> ib;
  sdma::fence(ib, ibbuf.va + 8192, 1);
  const uint64_t ib_va = place_ib(ibbuf, 0, ib);
  const auto ib_bytes = static_cast<uint32_t>(ib.size() * 4);

  uint64_t last_seq = 0;
  // A CS listing `handles`, through a BO list object (as_chunk false) or a BO_HANDLES chunk; a
  // submission that was taken is waited for, and its sequence number must follow the last one.
  const auto listing = [&](std::vector<uint32_t> handles, bool as_chunk) {
    std::vector<drm_amdgpu_bo_list_entry> entries;
    for (const uint32_t h : handles)
      entries.push_back({h, 0});
    drm_amdgpu_bo_list_in in{};
    in.bo_number = static_cast<uint32_t>(entries.size());
    in.bo_info_size = sizeof(drm_amdgpu_bo_list_entry);
    in.bo_info_ptr = reinterpret_cast<uintptr_t>(entries.data());
    uint32_t list = 0;
    std::vector<drm_amdgpu_cs_chunk> chunks;
    if (as_chunk) {
      chunks.push_back(
          {AMDGPU_CHUNK_ID_BO_HANDLES, sizeof(in) / 4, reinterpret_cast<uintptr_t>(&in)});
    } else {
      drm_amdgpu_bo_list l{};
      l.in = in;
      l.in.operation = AMDGPU_BO_LIST_OP_CREATE;
      REQUIRE(xioctl(fd.get(), DRM_IOCTL_AMDGPU_BO_LIST, &l) == 0);
      list = l.out.list_handle;
    }
    const uint64_t jobs = counters().jobs_submitted;
    uint64_t seq = 0;
    const int r = submit(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, ib_va, ib_bytes, &seq, chunks, list);
    if (list) {
      drm_amdgpu_bo_list d{};
      d.in.operation = AMDGPU_BO_LIST_OP_DESTROY;
      d.in.list_handle = list;
      CHECK(xioctl(fd.get(), DRM_IOCTL_AMDGPU_BO_LIST, &d) == 0);
    }
    if (r == 0) {
      CHECK(seq == last_seq + 1);
      last_seq = seq;
      CHECK(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == 0);
    } else {
      CHECK(counters().jobs_submitted == jobs);  // nothing was submitted
    }
    return r;
  };
  const auto both_ways = [&](std::vector<uint32_t> handles) {
    const int by_list = listing(handles, false);
    CHECK(listing(handles, true) == by_list);
    return by_list;
  };

  void *mem = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mem != MAP_FAILED);
  auto *pages = static_cast<uint8_t *>(mem);
  uint32_t rw = 0, ro = 0, other = 0;
  REQUIRE(gem_userptr(fd.get(), mem, 8192,
                      AMDGPU_GEM_USERPTR_VALIDATE | AMDGPU_GEM_USERPTR_REGISTER, &rw) == 0);
  REQUIRE(gem_userptr(fd.get(), mem, 8192, AMDGPU_GEM_USERPTR_READONLY, &ro) == 0);
  REQUIRE(gem_create(fd.get(), 4096, AMDGPU_GEM_DOMAIN_GTT, 0, &other) == 0);
  CHECK(both_ways({other, rw, ro}) == 0);

  // The second page made read-only: the writable object is refused, the read-only one is not.
  REQUIRE(mprotect(pages + 4096, 4096, PROT_READ) == 0);
  CHECK(both_ways({other, rw}) == -EPERM);
  CHECK(both_ways({other, ro}) == 0);
  // No access at all: both are refused, and a CS that does not list them is not.
  REQUIRE(mprotect(pages, 8192, PROT_NONE) == 0);
  CHECK(both_ways({rw}) == -EFAULT);
  CHECK(both_ways({ro, other}) == -EFAULT);
  CHECK(both_ways({other}) == 0);
  // The pages back: taken again.
  REQUIRE(mprotect(pages, 8192, PROT_READ | PROT_WRITE) == 0);
  CHECK(both_ways({rw, ro}) == 0);
  gem_close(fd.get(), rw);
  gem_close(fd.get(), ro);
  munmap(mem, 8192);

  // Pages the process unmapped after registering them (a hole: no VMA).
  const auto unmapped = with_hole(3, 1, [&](uint8_t *region) {
    uint32_t h = 0;
    if (gem_userptr(fd.get(), region, 3 * 4096, AMDGPU_GEM_USERPTR_REGISTER, &h)) return 1;
    const int r = both_ways({other, h});
    gem_close(fd.get(), h);
    return r;
  });
  REQUIRE(unmapped.has_value());
  CHECK(*unmapped == -EFAULT);
  gem_close(fd.get(), other);
}
