// fork(): a child (vtest forks one per client) gets a working emulator of its own, and the parent's
// work in flight is not disturbed.

#include <catch2/catch.hpp>

#include "emu_test_support.h"

using namespace rvgl::emu_test;

TEST_CASE("a forked child uses the emulator while the parent's job runs on", "[fork]") {
  Knob latency("RVGL_EMU_JOB_LATENCY_US", "100000", "0");
  Fd fd = open_render();
  GpuBuffer buf;
  REQUIRE(buf.create(fd.get(), 64 * 1024, 0x700000) == 0);
  uint32_t ctx = 0;
  REQUIRE(ctx_create(fd.get(), &ctx) == 0);
  std::vector<uint32_t> ib;
  sdma::const_fill(ib, buf.va + 4096, 0x77777777u, 4096);
  uint64_t seq = 0;
  REQUIRE(submit(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, place_ib(buf, 0, ib), ib.size() * 4, &seq) ==
          0);

  const pid_t pid = fork();
  if (pid == 0) {
    // The child: its own file on the node, objects, mappings; the inherited fd still names the
    // parent's file (a copy of its tables).
    int bad = 0;
    const int mine = open("/dev/dri/renderD128", O_RDWR | O_CLOEXEC);
    uint32_t h = 0;
    if (mine < 0 || gem_create(mine, 8192, AMDGPU_GEM_DOMAIN_VRAM, 0, &h) != 0) bad |= 1;
    if (gem_va(mine, AMDGPU_VA_OP_MAP, h, 0x700000, 0, 8192) != 0) bad |= 2;
    if (gem_close(fd.get(), buf.handle) != 0) bad |= 4;
    if (gem_close(mine, h) != 0) bad |= 8;
    close(mine);
    _exit(bad);
  }
  REQUIRE(pid > 0);
  CHECK(child_exit_code(pid) == 0);
  // The parent's job completes as if nothing happened; its handle is still its own.
  CHECK(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == 0);
  CHECK(buf.u32()[1024] == 0x77777777u);
  uint64_t off;
  CHECK(gem_mmap_offset(fd.get(), buf.handle, &off) == 0);
}
