// Acceptance: two files opened on the same node share nothing: handles, VA mappings and faults
// stay with the file that made them.
#include <catch2/catch.hpp>

#include "emu_test_support.h"

using namespace rvgl::emu_test;

TEST_CASE("two fds on one node have separate handles and GPU VMs", "[isolation][acceptance]") {
  // About the stopping behaviour (amdgpu.vm_fault_stop=2); the default is
  // test_vm_fault_default.cpp.
  Knob stop("RVGL_EMU_VM_FAULT_STOP", "2", "0");
  Fd a = open_render(), b = open_render();
  REQUIRE(a.get() >= 0);
  REQUIRE(b.get() >= 0);

  uint32_t ha = 0;
  REQUIRE(gem_create(a.get(), 8192, AMDGPU_GEM_DOMAIN_GTT, 0, &ha) == 0);

  SECTION("a GEM handle of one file is unknown to the other") {
    uint64_t off = 0;
    CHECK(gem_mmap_offset(b.get(), ha, &off) == -ENOENT);
    CHECK(gem_va(b.get(), AMDGPU_VA_OP_MAP, ha, 0x100000, 0, 8192) == -ENOENT);
    CHECK(gem_close(b.get(), ha) == -EINVAL);
    // Nor can the other file map the object through its own fd at a's offset.
    REQUIRE(gem_mmap_offset(a.get(), ha, &off) == 0);
    errno = 0;
    CHECK(mmap(nullptr, 8192, PROT_READ, MAP_SHARED, b.get(), static_cast<off_t>(off)) ==
          MAP_FAILED);
    CHECK(errno == EACCES);
    CHECK(gem_close(a.get(), ha) == 0);
    CHECK(gem_close(a.get(), ha) == -EINVAL);
  }

  SECTION("a VA mapped in one file is unmapped in the other, and touching it there faults") {
    constexpr uint64_t kSharedVa = 0x200000;
    REQUIRE(gem_va(a.get(), AMDGPU_VA_OP_MAP, ha, kSharedVa, 0, 8192) == 0);
    // b can map its own object at the very same address: the VMs do not overlap.
    GpuBuffer bbuf;
    REQUIRE(bbuf.create(b.get(), 4096, 0x400000) == 0);
    uint32_t ctx_a = 0, ctx_b = 0;
    REQUIRE(ctx_create(a.get(), &ctx_a) == 0);
    REQUIRE(ctx_create(b.get(), &ctx_b) == 0);

    std::vector<uint32_t> ib;
    sdma::copy_linear(ib, bbuf.va + 2048, kSharedVa, 256);
    const uint64_t ib_va = place_ib(bbuf, 0, ib);
    uint64_t seq = 0;
    REQUIRE(submit(b.get(), ctx_b, AMDGPU_HW_IP_DMA, 0, ib_va, ib.size() * 4, &seq) == 0);
    CHECK(wait_cs(b.get(), ctx_b, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == -ETIME);
    CHECK(vm_fault(b.get()).addr == kSharedVa);
    CHECK((ctx_state2(b.get(), ctx_b) & AMDGPU_CTX_QUERY2_FLAGS_GUILTY) != 0);
    // a saw nothing of it but the GPU reset that ended b's job, as every context does.
    CHECK(vm_fault(a.get()).addr == 0);
    CHECK(ctx_state2(a.get(), ctx_a) == AMDGPU_CTX_QUERY2_FLAGS_RESET);
    rvgl_emu_file_counters fa{}, fb{};
    REQUIRE(rvgl_emu_get_file_counters(a.get(), &fa, sizeof(fa)) == 0);
    REQUIRE(rvgl_emu_get_file_counters(b.get(), &fb, sizeof(fb)) == 0);
    CHECK(fa.bo_handles == 1);
    CHECK(fa.vm_mappings == 1);
    CHECK(fb.jobs_submitted == 1);
    CHECK(fa.jobs_submitted == 0);
  }
}

TEST_CASE("closing a file releases what it held", "[isolation]") {
  const auto before = counters();
  {
    Fd fd = open_render();
    REQUIRE(fd.get() >= 0);
    uint32_t h[3];
    for (auto &x : h)
      REQUIRE(gem_create(fd.get(), 4096, AMDGPU_GEM_DOMAIN_VRAM, 0, &x) == 0);
    uint32_t ctx;
    REQUIRE(ctx_create(fd.get(), &ctx) == 0);
    CHECK(counters().bos_alive == before.bos_alive + 3);
    CHECK(counters().contexts_alive == before.contexts_alive + 1);
  }
  CHECK(counters().bos_alive == before.bos_alive);
  CHECK(counters().contexts_alive == before.contexts_alive);
  CHECK(counters().device_files_open == before.device_files_open);
}

TEST_CASE("a dup'ed fd is the same file, a new open is not", "[isolation]") {
  Fd a = open_render();
  Fd dup_a(dup(a.get()));
  REQUIRE(dup_a.get() >= 0);
  uint32_t h = 0;
  REQUIRE(gem_create(a.get(), 4096, AMDGPU_GEM_DOMAIN_GTT, 0, &h) == 0);
  uint64_t off = 0;
  CHECK(gem_mmap_offset(dup_a.get(), h, &off) == 0);
  Fd c(fcntl(a.get(), F_DUPFD_CLOEXEC, 100));
  REQUIRE(c.get() >= 100);
  CHECK(gem_mmap_offset(c.get(), h, &off) == 0);
  a.reset();
  // The file lives on through its other descriptors.
  CHECK(gem_mmap_offset(dup_a.get(), h, &off) == 0);
  // dup2 over another file's fd: that fd now names this file (and the other file is closed).
  Fd other = open_render();
  const auto before = counters();
  REQUIRE(dup2(dup_a.get(), other.get()) == other.get());
  CHECK(gem_mmap_offset(other.get(), h, &off) == 0);
  CHECK(counters().device_files_open == before.device_files_open - 1);
  // A failed dup2 leaves the target alone.
  CHECK(dup2(12345, other.get()) == -1);
  CHECK(gem_mmap_offset(other.get(), h, &off) == 0);
}
