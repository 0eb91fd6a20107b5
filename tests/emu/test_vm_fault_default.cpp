// Point 8 of issue 16: VM faults as the kernel handles them by default (amdgpu.vm_fault_stop=0).
// The hub sends the faulting access to the dummy page (gfxhub_v*_set_fault_enable_default(adev,
// true)): the write is dropped, the read returns zeros, the job completes, the fault goes to the
// VM's fault cache (gmc_v*_process_interrupt -> amdgpu_vm_update_fault_cache) and no context is
// blamed. RVGL_EMU_VM_FAULT_STOP=2 restores the stopping behaviour (test_faults.cpp).
#include <catch2/catch.hpp>

#include "emu_test_support.h"
#include "support/held_interrupts.h"

using namespace rvgl::emu_test;

namespace {

constexpr uint64_t kUnmapped = 0x7654321000ull;

struct FaultRig {
  Fd fd = open_render();
  GpuBuffer buf;
  uint32_t ctx = 0;
  FaultRig() {
    REQUIRE(fd.get() >= 0);
    REQUIRE(buf.create(fd.get(), 64 * 1024, 0x1000000) == 0);
    REQUIRE(ctx_create(fd.get(), &ctx) == 0);
  }
  int run(uint32_t ip, const std::vector<uint32_t> &ib, uint32_t ib_off = 0) {
    uint64_t seq = 0;
    if (int r = submit(fd.get(), ctx, ip, 0, place_ib(buf, ib_off, ib), ib.size() * 4, &seq))
      return r;
    return wait_cs(fd.get(), ctx, ip, 0, seq, abs_timeout_ms(5000));
  }
  // An SDMA job whose first write (a fence) goes to `fault_va`, unmapped, and whose second
  // writes 0xabcd to dword `dword` of buf, placed at `ib_off`; returns how the job ended.
  int run_fault_then_fence(uint64_t fault_va, uint32_t dword, uint32_t ib_off = 0) {
    std::vector<uint32_t> ib;
    sdma::fence(ib, fault_va, 0xbad);
    sdma::fence(ib, buf.va + dword * 4, 0xabcd);
    return run(AMDGPU_HW_IP_DMA, ib, ib_off);
  }
};

}  // namespace

TEST_CASE("by default a VM fault drops the write, reads zeros and the job completes",
          "[faults][vm_fault_stop][acceptance]") {
  Knob stop("RVGL_EMU_VM_FAULT_STOP", "0", "0");
  REQUIRE(stop.rc() == 0);
  FaultRig r;
  std::memset(r.buf.u8() + 8192, 0xee, 4096);
  const auto before = counters();

  // A read of an unmapped page (zeros land in the buffer), a write into one (dropped), and a
  // fence after both that must still be written.
  std::vector<uint32_t> ib;
  sdma::copy_linear(ib, r.buf.va + 8192, kUnmapped + 0x40, 256);
  sdma::fence(ib, kUnmapped + 0x3000, 0xbad);
  sdma::fence(ib, r.buf.va + 64, 0xabcd);
  CHECK(r.run(AMDGPU_HW_IP_DMA, ib) == 0);
  CHECK(r.buf.u32()[16] == 0xabcd);
  for (int i = 0; i < 256; ++i)
    CHECK(r.buf.u8()[8192 + i] == 0);
  CHECK(r.buf.u8()[8192 + 256] == 0xee);  // past the copy: untouched

  // Nothing is blamed: no GUILTY, no RESET, and the context takes more work.
  CHECK(ctx_state2(r.fd.get(), r.ctx) == 0);
  const auto f = vm_fault(r.fd.get());
  // The cache holds the first fault of the burst (later ones read status 0 and are skipped).
  CHECK(f.addr == kUnmapped);
  CHECK((f.status & (1u << 8)) != 0);   // MAPPING_ERROR
  CHECK((f.status & (1u << 18)) == 0);  // a read
  CHECK(f.vmhub == 0);
  const auto after = counters();
  CHECK(after.vm_faults == before.vm_faults + 1);
  CHECK(after.jobs_failed == before.jobs_failed);
  CHECK(after.jobs_completed == before.jobs_completed + 1);

  std::vector<uint32_t> next;
  sdma::fence(next, r.buf.va + 128, 0x600d);
  CHECK(r.run(AMDGPU_HW_IP_DMA, next, 1024) == 0);
  CHECK(r.buf.u32()[32] == 0x600d);
}

TEST_CASE("by default a write the mapping does not permit is dropped, the job goes on",
          "[faults][vm_fault_stop][acceptance]") {
  Knob stop("RVGL_EMU_VM_FAULT_STOP", "0", "0");
  FaultRig r;
  uint32_t h = 0;
  REQUIRE(gem_create(r.fd.get(), 8192, AMDGPU_GEM_DOMAIN_GTT, 0, &h) == 0);
  auto *ro = static_cast<uint32_t *>(gem_cpu_map(r.fd.get(), h, 8192));
  REQUIRE(ro != nullptr);
  ro[0] = 0x11111111;
  ro[1024] = 0x22222222;
  constexpr uint64_t kRoVa = 0x4000000;
  REQUIRE(gem_va(r.fd.get(), AMDGPU_VA_OP_MAP, h, kRoVa, 0, 8192, AMDGPU_VM_PAGE_READABLE) == 0);

  // Compute: WRITE_DATA into the read-only page, then one into the buffer; a copy from the
  // read-only page still reads it (only writes are refused).
  std::vector<uint32_t> ib;
  pm4::write_data(ib, kRoVa + 4096, {0xdead});
  pm4::write_data(ib, r.buf.va + 256, {0x1234});
  pm4::dma_data_copy(ib, r.buf.va + 512, kRoVa, 4);
  CHECK(r.run(AMDGPU_HW_IP_COMPUTE, ib) == 0);
  CHECK(ro[1024] == 0x22222222);
  CHECK(r.buf.u32()[64] == 0x1234);
  CHECK(r.buf.u32()[128] == 0x11111111);
  const auto f = vm_fault(r.fd.get());
  CHECK(f.addr == kRoVa + 4096);
  CHECK((f.status & (1u << 8)) == 0);     // mapped: a permission fault
  CHECK(((f.status >> 4) & 0xf) == 0x4);  // PERMISSION_FAULTS: write
  CHECK((f.status & (1u << 18)) != 0);    // RW: a write
  CHECK((ctx_state2(r.fd.get(), r.ctx) & AMDGPU_CTX_QUERY2_FLAGS_GUILTY) == 0);
  munmap(ro, 8192);
  gem_close(r.fd.get(), h);
}

TEST_CASE("a copy straddling a mapping's end keeps the mapped part and zeros the rest",
          "[faults][vm_fault_stop]") {
  Knob stop("RVGL_EMU_VM_FAULT_STOP", "0", "0");
  FaultRig r;
  // buf is 64 KiB at 0x1000000; copy 8 KiB from its last 4 KiB onwards into its start.
  for (int i = 0; i < 1024; ++i)
    r.buf.u32()[15 * 1024 + i] = 0x5a5a0000u + static_cast<uint32_t>(i);
  std::memset(r.buf.u8() + 16384, 0xff, 8192);
  std::vector<uint32_t> ib;
  sdma::copy_linear(ib, r.buf.va + 16384, r.buf.va + 60 * 1024, 8192);
  CHECK(r.run(AMDGPU_HW_IP_DMA, ib) == 0);
  for (int i = 0; i < 1024; ++i)
    CHECK(r.buf.u32()[4096 + i] == 0x5a5a0000u + static_cast<uint32_t>(i));
  for (int i = 4096; i < 8192; ++i)
    CHECK(r.buf.u8()[16384 + i] == 0);
  CHECK(vm_fault(r.fd.get()).addr == r.buf.va + 64 * 1024);
}

TEST_CASE("RVGL_EMU_VM_FAULT_STOP=2 stops the job, blames the context and records the fault",
          "[faults][vm_fault_stop][acceptance]") {
  Knob stop("RVGL_EMU_VM_FAULT_STOP", "2", "0");
  REQUIRE(stop.rc() == 0);
  FaultRig r;
  const auto before = counters();
  CHECK(r.run_fault_then_fence(kUnmapped + 0x3000, 16) == -ETIME);
  CHECK(r.buf.u32()[16] == 0);
  CHECK((ctx_state2(r.fd.get(), r.ctx) & AMDGPU_CTX_QUERY2_FLAGS_GUILTY) != 0);
  CHECK(vm_fault(r.fd.get()).addr == kUnmapped + 0x3000);
  CHECK(counters().vm_faults == before.vm_faults + 1);
  CHECK(counters().jobs_failed == before.jobs_failed + 1);
}

TEST_CASE("RVGL_EMU_VM_FAULT_STOP=1 acts as 0 on the GFX9+ parts emulated",
          "[faults][vm_fault_stop]") {
  // STOP_FIRST is acted on only by gmc_v6/v7/v8's interrupt handlers; the GFX9+ hubs keep the
  // dummy-page redirect unless vm_fault_stop is 2. The emulator stopped the job here.
  Knob stop("RVGL_EMU_VM_FAULT_STOP", "1", "0");
  REQUIRE(stop.rc() == 0);
  FaultRig r;
  const auto before = counters();
  for (uint32_t i = 0; i < 2; ++i) {  // not the first fault only: every one
    CHECK(r.run_fault_then_fence(kUnmapped + 0x3000 + i * 0x1000, 16 + i * 2, i * 1024) == 0);
    CHECK(r.buf.u32()[16 + i * 2] == 0xabcd);
    CHECK(vm_fault(r.fd.get()).addr == kUnmapped + 0x3000 + i * 0x1000);
  }
  CHECK(ctx_state2(r.fd.get(), r.ctx) == 0);
  CHECK(counters().vm_faults == before.vm_faults + 2);
  CHECK(counters().jobs_failed == before.jobs_failed);
}

TEST_CASE("RVGL_EMU_VM_FAULT_STOP takes 0, 1 and 2 only", "[faults][vm_fault_stop]") {
  CHECK(rvgl_emu_set_knob("RVGL_EMU_VM_FAULT_STOP", "3") == -EINVAL);
  CHECK(rvgl_emu_set_knob("RVGL_EMU_VM_FAULT_STOP", "x") == -EINVAL);
  CHECK(rvgl_emu_set_knob("RVGL_EMU_VM_FAULT_STOP", "1") == 0);
  CHECK(rvgl_emu_set_knob("RVGL_EMU_VM_FAULT_STOP", "0") == 0);
}

TEST_CASE("the user fence is written before the interrupt handler records faults and signals",
          "[faults][vm_fault_stop]") {
  // amdgpu_ib_schedule(): the CP writes the user fence after the IBs and then raises the
  // end-of-pipe interrupt; the handler (amdgpu_ih_process, in ring order) fills the fault cache
  // and signals the fence. RVGL_EMU_IRQ_LATENCY_US is the handler's delay, read again while it
  // waits: its maximum holds the handler back until the test lowers it.
  Knob stop("RVGL_EMU_VM_FAULT_STOP", "0", "0");
  rvgl::test::HeldInterrupts irq;
  REQUIRE(irq.ok());
  FaultRig r;
  GpuBuffer page;
  REQUIRE(page.create(r.fd.get(), 4096, 0xc000000) == 0);
  const auto before = counters();
  std::vector<uint32_t> ib;
  sdma::fence(ib, kUnmapped + 0x3000, 0xbad);
  drm_amdgpu_cs_chunk_fence uf{page.handle, 4088};
  const std::vector<drm_amdgpu_cs_chunk> chunks{
      {AMDGPU_CHUNK_ID_FENCE, sizeof(uf) / 4, reinterpret_cast<uintptr_t>(&uf)}};
  uint64_t seq = 0;
  REQUIRE(submit(r.fd.get(), r.ctx, AMDGPU_HW_IP_DMA, 0, place_ib(r.buf, 0, ib), ib.size() * 4,
                 &seq, chunks) == 0);
  auto *user_fence = reinterpret_cast<volatile uint64_t *>(page.u8() + 4088);
  REQUIRE(eventually([&] { return *user_fence == seq; }));
  // Inside the handler's latency: no fault recorded, the fence not signalled.
  CHECK(counters().vm_faults == before.vm_faults);
  CHECK(vm_fault(r.fd.get()).addr == 0);
  CHECK(wait_cs(r.fd.get(), r.ctx, AMDGPU_HW_IP_DMA, 0, seq, 0) == 1);
  CHECK(wait_cs(r.fd.get(), r.ctx, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(50)) == 1);
  REQUIRE(irq.release());  // let the handler go
  CHECK(wait_cs(r.fd.get(), r.ctx, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == 0);
  CHECK(counters().vm_faults == before.vm_faults + 1);
  CHECK(vm_fault(r.fd.get()).addr == kUnmapped + 0x3000);
  CHECK(rvgl_emu_set_knob("RVGL_EMU_IRQ_LATENCY_US", "10000001") == -EINVAL);  // past the hold
}

TEST_CASE("the module parameter the host reads follows RVGL_EMU_VM_FAULT_STOP",
          "[faults][vm_fault_stop]") {
  // amdgpu_drv.c: vm_fault_stop is 0444 under /sys/module/amdgpu/parameters, printed "%d\n".
  auto read = [] {
    FILE *f = std::fopen("/sys/module/amdgpu/parameters/vm_fault_stop", "re");
    if (!f) return std::string("(none)");
    char buf[16] = {};
    const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
    std::fclose(f);
    return std::string(buf, n);
  };
  {
    Knob stop("RVGL_EMU_VM_FAULT_STOP", "2", "0");
    REQUIRE(stop.rc() == 0);
    CHECK(read() == "2\n");
  }
  CHECK(read() == "0\n");
}
