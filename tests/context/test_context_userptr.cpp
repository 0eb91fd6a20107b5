// Issue 4: userptr blobs are GPU-visible with no copy, with few host objects, read-only honoured.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <random>

#include "../tools/common/amd_packets.h"
#include "rvgl_emu.h"
#include "support/context_harness.h"
#include "support/guest_ram.h"
#include "util/mapping.h"
#include "util/unique_fd.h"

using namespace rvgl;
using namespace rvgl::test;
namespace pk = rvgl::packets;

namespace {

constexpr uint64_t kPage = 4096;

rvgl_emu_counters emu_counters() {
  rvgl_emu_counters c{};
  rvgl_emu_get_counters(&c, sizeof(c));
  return c;
}

// Guest RAM as a VMM holds it: a memfd mapped shared.
struct GuestRam {
  UniqueFd fd;
  Mapping map;
  explicit GuestRam(size_t bytes) {
    fd.reset(memfd_create("guest-ram", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    REQUIRE(fd);
    REQUIRE(ftruncate(fd.get(), static_cast<off_t>(bytes)) == 0);
    map = Mapping::map_shared(fd.get(), bytes, PROT_READ | PROT_WRITE);
    REQUIRE(map.valid());
  }
  uint8_t *page(size_t i) const { return map.as<uint8_t>() + i * kPage; }
};

// Every other page of `ram`, `pages` of them, in an order shuffled by `seed`: nothing is
// adjacent in host VA.
std::vector<iovec> every_other_page_shuffled(const GuestRam &ram, size_t pages, uint32_t seed) {
  std::vector<size_t> order(pages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  std::vector<iovec> iov;
  for (size_t i : order)
    iov.push_back({ram.page(2 * i), kPage});
  return iov;
}

// SDMA-copies `bytes` from src_va into a fresh GTT buffer and returns its contents.
std::vector<uint8_t> gpu_read(ContextHarness &h, uint32_t sdma, uint64_t src_va, uint64_t bytes,
                              uint64_t scratch_va, uint64_t fence_id) {
  auto dst = h.mapped_bo(bytes);
  auto ib = h.mapped_bo(kPage);
  REQUIRE(h.va_map(dst.bo, 0, 0, scratch_va, bytes) == 0);
  REQUIRE(h.va_map(ib.bo, 0, 0, scratch_va + bytes, kPage) == 0);
  std::vector<uint32_t> dw;
  for (uint64_t off = 0; off < bytes; off += 1 << 20)
    pk::sdma_copy_linear(dw, scratch_va + off, src_va + off,
                         static_cast<uint32_t>(std::min<uint64_t>(1 << 20, bytes - off)));
  pk::sdma_pad(dw);
  int32_t r;
  h.submit(sdma, {ContextHarness::write_ib(ib, scratch_va + bytes, dw)}, {}, &r);
  REQUIRE(r == 0);
  REQUIRE(h.fence(1, fence_id) == 0);
  REQUIRE(h.wait_fence(1, fence_id));
  return {dst.ptr(), dst.ptr() + bytes};
}

// A userptr import of `iov` (it must succeed), with the device's counters around it and the
// emulated ioctls this thread made for it (the engine thread makes its own meanwhile).
struct CountedImport {
  uint32_t res = 0;
  uint64_t ioctls = 0;
  rvgl_emu_counters before{}, after{};
};
CountedImport import_counted(ContextHarness &h, const std::vector<iovec> &iov) {
  CountedImport c;
  c.before = emu_counters();
  const uint64_t ioctls_before = rvgl_emu_thread_ioctls();
  int err;
  c.res = userptr_blob(h, iov, &err);
  c.ioctls = rvgl_emu_thread_ioctls() - ioctls_before;
  REQUIRE(err == 0);
  c.after = emu_counters();
  return c;
}

// The guest writes each blob page (a pattern from `mul`, `add`) after the import; the blob is
// mapped at the start of the VA space and read back through SDMA. Returns the pages the GPU saw
// differently from the guest's, in blob order.
size_t gpu_mismatched_pages(ContextHarness &h, uint32_t res, const std::vector<iovec> &iov,
                            uint32_t mul, uint32_t add) {
  for (size_t k = 0; k < iov.size(); ++k) {
    auto *p = reinterpret_cast<uint32_t *>(iov[k].iov_base);
    std::fill(p, p + kPage / 4, static_cast<uint32_t>(k * mul + add));
  }
  const uint64_t va = h.capset().va_start;
  REQUIRE(h.va_map(0, res, 0, va, iov.size() * kPage) == 0);
  int32_t r;
  const uint32_t sdma = h.queue_create(RVGL_IP_SDMA, 1, &r);
  REQUIRE(r == 0);
  auto seen = gpu_read(h, sdma, va, iov.size() * kPage, va + (1ull << 30), 1);
  size_t mismatched = 0;
  for (size_t k = 0; k < iov.size(); ++k)
    mismatched += std::memcmp(seen.data() + k * kPage, iov[k].iov_base, kPage) != 0;
  return mismatched;
}

// Pages 8-23 of `ram` as one userptr blob (one iovec); its res id.
uint32_t sixteen_pages(ContextHarness &h, GuestRam &ram) {
  int err;
  const iovec iov{ram.page(8), 16 * kPage};
  const uint32_t res = userptr_blob(h, {&iov, 1}, &err);
  REQUIRE(err == 0);
  return res;
}

}  // namespace

TEST_CASE("userptr: one iovec, both directions, no copy", "[context][userptr]") {
  ContextHarness h;
  h.create_shmem();
  GuestRam ram(64 * kPage);
  const auto before = emu_counters();
  const uint32_t res = sixteen_pages(h, ram);
  CHECK(emu_counters().userptr_alive - before.userptr_alive == 1);
  CHECK(emu_counters().bytes_copied == before.bytes_copied);  // registering copies nothing

  // Written by the guest after registration: the GPU must see it.
  std::iota(reinterpret_cast<uint32_t *>(ram.page(8)), reinterpret_cast<uint32_t *>(ram.page(24)),
            7u);
  const uint64_t va = h.capset().va_start;
  REQUIRE(h.va_map(0, res, 0, va, 16 * kPage) == 0);
  int32_t r;
  const uint32_t sdma = h.queue_create(RVGL_IP_SDMA, 1, &r);
  REQUIRE(r == 0);
  auto seen = gpu_read(h, sdma, va, 16 * kPage, va + (1 << 24), 1);
  CHECK(std::memcmp(seen.data(), ram.page(8), 16 * kPage) == 0);

  // And what the GPU writes lands in guest memory.
  auto ib = h.mapped_bo(kPage);
  REQUIRE(h.va_map(ib.bo, 0, 0, va + (1 << 25), kPage) == 0);
  std::vector<uint32_t> dw;
  pk::sdma_const_fill(dw, va + 4 * kPage, 0x5a5a5a5au, kPage);
  pk::sdma_pad(dw);
  h.submit(sdma, {ContextHarness::write_ib(ib, va + (1 << 25), dw)}, {}, &r);
  REQUIRE(r == 0);
  REQUIRE(h.fence(1, 2) == 0);
  REQUIRE(h.wait_fence(1, 2));
  CHECK(reinterpret_cast<uint32_t *>(ram.page(12))[0] == 0x5a5a5a5au);
  CHECK(reinterpret_cast<uint32_t *>(ram.page(12))[1023] == 0x5a5a5a5au);

  // Dropping the blob makes the pages GPU-invisible at once.
  h.ctx().detach_resource(res);
  CHECK(h.ctx().stats().va_mappings == 3);  // the three scratch mappings only
  CHECK(emu_counters().userptr_alive == before.userptr_alive);
}

TEST_CASE("userptr: a dropped blob is let go by the kernel even when its BO list update fails",
          "[context][userptr]") {
  // After a submission the kernel's BO list references every mapped object. Dropping the blob
  // updates that list; if the update fails the old list must not keep the userptr object (and
  // its pages) alive past the VMM's call (found by an audit, by reading).
  ContextHarness h;
  h.create_shmem();
  GuestRam ram(64 * kPage);
  const auto before = emu_counters();
  const uint32_t res = sixteen_pages(h, ram);
  const uint64_t va = h.capset().va_start;
  REQUIRE(h.va_map(0, res, 0, va, 16 * kPage) == 0);
  int32_t r;
  const uint32_t sdma = h.queue_create(RVGL_IP_SDMA, 1, &r);
  REQUIRE(r == 0);
  gpu_read(h, sdma, va, 16 * kPage, va + (1 << 24), 1);  // a CS: the list names the blob
  rvgl_emu_reset_fault_injection();
  REQUIRE(rvgl_emu_set_knob("RVGL_EMU_FAIL", "BO_LIST:1:ENOMEM") == 0);
  h.ctx().detach_resource(res);
  rvgl_emu_reset_fault_injection();
  CHECK(emu_counters().userptr_alive == before.userptr_alive);
  // The next submission makes a list of what is still mapped, and runs.
  gpu_read(h, sdma, va + (1 << 24), kPage, va + (1 << 26), 2);
}

TEST_CASE("userptr: pages the VMM takes back fail only the submissions that still name them",
          "[context][userptr]") {
  // Every CS looks up again the pages of each userptr object the kernel's BO list names
  // (amdgpu_cs_parser_bos()), and the list follows the guest's mappings. While the guest maps a
  // blob whose pages the VMM withdrew, its submissions get the kernel's EFAULT and the queue
  // stays usable; once the guest unmaps the blob, or the VMM detaches it and then unmaps the
  // pages, the context's next submission runs.
  ContextHarness h;
  h.create_shmem();
  const uint64_t va = h.capset().va_start, ib_va = va + (1 << 24), dst_va = va + (1 << 25);
  int32_t r;
  const uint32_t sdma = h.queue_create(RVGL_IP_SDMA, 1, &r);
  REQUIRE(r == 0);
  auto ib = h.mapped_bo(kPage);
  auto dst = h.mapped_bo(kPage);
  REQUIRE(h.va_map(ib.bo, 0, 0, ib_va, kPage) == 0);
  REQUIRE(h.va_map(dst.bo, 0, 0, dst_va, kPage) == 0);
  uint32_t n = 0;
  // A submission that touches only `dst`: the SUBMIT's result, and the job's write when taken.
  const auto submit_other = [&] {
    std::vector<uint32_t> dw;
    pk::sdma_fence(dw, dst_va, ++n);
    pk::sdma_pad(dw);
    int32_t result = 0;
    h.submit(sdma, {ContextHarness::write_ib(ib, ib_va, dw)}, {}, &result);
    if (result == 0) {
      REQUIRE(h.fence(1, n) == 0);
      REQUIRE(h.wait_fence(1, n));
      CHECK(*dst.ptr<uint32_t>() == n);
    }
    return result;
  };
  const auto before = emu_counters();
  for (const bool detach_first : {false, true}) {
    INFO((detach_first ? "detached, then unmapped" : "withdrawn while mapped"));
    void *pages =
        mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(pages != MAP_FAILED);
    const iovec iov{pages, 4 * kPage};
    int err;
    const uint32_t res = userptr_blob(h, {&iov, 1}, &err);
    REQUIRE(err == 0);
    REQUIRE(h.va_map(0, res, 0, va, 4 * kPage) == 0);
    CHECK(submit_other() == 0);  // the kernel's list names the blob from here
    if (detach_first) {
      h.ctx().detach_resource(res);
      REQUIRE(munmap(pages, 4 * kPage) == 0);
      CHECK(submit_other() == 0);
    } else {
      // No access left (an unmap would free the range for another thread's next mmap).
      REQUIRE(mprotect(pages, 4 * kPage, PROT_NONE) == 0);
      CHECK(submit_other() == -EFAULT);
      REQUIRE(h.va_unmap(va, 4 * kPage) == 0);
      CHECK(submit_other() == 0);
      h.ctx().detach_resource(res);
      munmap(pages, 4 * kPage);
    }
    CHECK(emu_counters().userptr_alive == before.userptr_alive);
  }
  const auto st = h.queue_state(sdma);
  CHECK(st.hdr.result == 0);
  CHECK(st.state == RVGL_QUEUE_STATE_OK);
}

TEST_CASE("userptr: 4096 scattered pages of a memfd need at most 2 host objects",
          "[context][userptr]") {
  ContextHarness h;
  h.create_shmem();
  constexpr size_t kPages = 4096;
  GuestRam ram(2 * kPages * kPage);
  // Every other page of guest RAM, in shuffled order: nothing is adjacent in host VA.
  const std::vector<iovec> iov = every_other_page_shuffled(ram, kPages, 42);

  const auto before = emu_counters();
  int err;
  const uint32_t res = userptr_blob(h, iov, &err);
  REQUIRE(err == 0);
  const auto after = emu_counters();
  CHECK(after.bos_created - before.bos_created == h.ctx().stats().last_userptr_objects);
  CHECK(h.ctx().stats().last_userptr_objects == 1);
  CHECK(after.bytes_copied == before.bytes_copied);
  INFO("strategy " << userptr_strategy_name(h.ctx().stats().last_userptr_strategy));

  // The guest writes each page after registration; the GPU reads them as one linear buffer.
  CHECK(gpu_mismatched_pages(h, res, iov, 2654435761u, 0) == 0);
  // The only bytes the "GPU" copied were the readback's.
  CHECK(emu_counters().bytes_copied - after.bytes_copied == kPages * kPage);
}

TEST_CASE("userptr: read-only pages refuse writable mappings and fault GPU writes",
          "[context][userptr]") {
  ContextHarness h;
  h.create_shmem();
  GuestRam ram(16 * kPage);
  std::memset(ram.page(0), 0x11, 4 * kPage);
  int err;
  const iovec iov{ram.page(0), 4 * kPage};
  const uint32_t res = userptr_blob(h, {&iov, 1}, &err, true);
  REQUIRE(err == 0);
  const uint64_t va = h.capset().va_start;
  CHECK(h.va_map(0, res, 0, va, 4 * kPage, RVGL_VA_FLAG_READ | RVGL_VA_FLAG_WRITE) == -EACCES);
  REQUIRE(h.va_map(0, res, 0, va, 4 * kPage, RVGL_VA_FLAG_READ) == 0);

  int32_t r;
  const uint32_t compute = h.queue_create(RVGL_IP_COMPUTE, 2, &r);
  REQUIRE(r == 0);
  auto ib = h.mapped_bo(kPage);
  REQUIRE(h.va_map(ib.bo, 0, 0, va + (1 << 24), kPage) == 0);
  const auto before = emu_counters();
  std::vector<uint32_t> dw;
  pk::pm4_write_data(dw, va + 64, {0xdeadbeefu});
  h.submit(compute, {ContextHarness::write_ib(ib, va + (1 << 24), dw)}, {}, &r);
  REQUIRE(r == 0);
  REQUIRE(h.fence(2, 9) == 0);
  REQUIRE(h.wait_fence(2, 9));

  CHECK(reinterpret_cast<uint32_t *>(ram.page(0))[16] == 0x11111111u);  // untouched
  CHECK(emu_counters().vm_faults == before.vm_faults + 1);
  auto st = h.queue_state(compute);
  CHECK(st.hdr.result == 0);
  CHECK(st.state == RVGL_QUEUE_STATE_LOST);
  CHECK(st.flags == (RVGL_QUEUE_FLAG_GUILTY | RVGL_QUEUE_FLAG_VM_FAULT));
  CHECK(st.error == -ETIME);  // the job the fault stopped timed out (amdgpu_job_timedout())
  // A lost queue refuses new work with a clear errno; destroy and recreate works.
  h.submit(compute, {ContextHarness::write_ib(ib, va + (1 << 24), dw)}, {}, &r);
  CHECK(r == -ECANCELED);
  CHECK(h.queue_destroy(compute) == 0);
  h.queue_create(RVGL_IP_COMPUTE, 2, &r);
  CHECK(r == 0);
}

TEST_CASE("userptr: many small pieces of a sealed memfd go through udmabuf, no copy",
          "[context][userptr]") {
  ContextHarness h;
  h.create_shmem();
  // 2048 shuffled 4 KiB pages: two udmabufs by the kernel's default 1024-item limit. Sealed
  // against shrinking, as udmabuf requires (QEMU's memory-backend-memfd seals its RAM).
  constexpr size_t kPages = 2048;
  GuestRam ram(2 * kPages * kPage);
  REQUIRE(fcntl(ram.fd.get(), F_ADD_SEALS, F_SEAL_SHRINK) == 0);
  const std::vector<iovec> iov = every_other_page_shuffled(ram, kPages, 7);

  const CountedImport c = import_counted(h, iov);
  CHECK(h.ctx().stats().last_userptr_strategy == UserptrStrategy::kUdmabuf);
  CHECK(c.after.udmabufs_created - c.before.udmabufs_created == 2);
  // One CREATE_LIST and one PRIME import per udmabuf, nothing else reaches the device: the VMAs
  // behind the pages are looked up on /proc/self/maps, not through the emulated kernel.
  CHECK(c.after.dmabuf_imports - c.before.dmabuf_imports == 2);
  CHECK(c.ioctls == 4);
  CHECK(h.ctx().stats().last_userptr_objects == 2);
  CHECK(h.ctx().stats().usage.objects == 2);  // charged per kernel object
  CHECK(c.after.bytes_copied == c.before.bytes_copied);

  // Written by the guest after the import: the GPU reads the very pages, in blob order.
  CHECK(gpu_mismatched_pages(h, c.res, iov, 40503u, 1) == 0);

  // Detach releases the udmabufs and their imports, and their charge, at once.
  const uint64_t objects = h.ctx().stats().usage.objects;  // + gpu_read's two BOs
  h.ctx().detach_resource(c.res);
  CHECK(emu_counters().udmabufs_alive == c.before.udmabufs_alive);
  CHECK(h.ctx().stats().usage.objects == objects - 2);
}

TEST_CASE("userptr: pages the VMM mapped read-only never become writable to the GPU",
          "[context][userptr]") {
  // Scattered pages go through the file behind them (an alias mapped writable, or udmabufs of
  // the file's pages), which bypassed the protection of the VMM's own mapping: a writable blob
  // over pages the VMM mapped read-only was imported, and a GPU job could write them. The kernel
  // refuses such a userptr of the VMM's mapping (-EFAULT), as the stitched import, whatever the
  // layout, now does. Found by an audit.
  ContextHarness h;
  h.create_shmem();
  constexpr size_t kPages = 64;  // more ranges than are stitched
  GuestRam ram(2 * kPages * kPage);
  REQUIRE(fcntl(ram.fd.get(), F_ADD_SEALS, F_SEAL_SHRINK) == 0);  // udmabuf would take it
  REQUIRE(mprotect(ram.page(0), 2 * kPages * kPage, PROT_READ) == 0);
  const std::vector<iovec> iov = every_other_page_shuffled(ram, kPages, 11);
  const auto before = emu_counters();
  const uint64_t objects = h.ctx().stats().usage.objects;
  int err;
  userptr_blob(h, iov, &err);
  CHECK(err == -EFAULT);
  CHECK(emu_counters().udmabufs_created == before.udmabufs_created);
  CHECK(h.ctx().stats().usage.objects == objects);
  // Read-only, the same pages are imported through the file.
  userptr_blob(h, iov, &err, true);
  CHECK(err == 0);
  CHECK(h.ctx().stats().last_userptr_strategy != UserptrStrategy::kStitched);
}

TEST_CASE("userptr: pages of two guest-RAM memfds, interleaved, through udmabuf",
          "[context][userptr]") {
  ContextHarness h;
  h.create_shmem();
  // A VMM with two RAM regions (two memfds, two mappings), a blob taking its pages from both in
  // shuffled order: every other item switches file and VMA.
  constexpr size_t kPages = 2048;
  GuestRam low(kPages / 2 * kPage), high(kPages / 2 * kPage);
  REQUIRE(fcntl(low.fd.get(), F_ADD_SEALS, F_SEAL_SHRINK) == 0);
  REQUIRE(fcntl(high.fd.get(), F_ADD_SEALS, F_SEAL_SHRINK) == 0);
  std::vector<size_t> order(kPages / 2);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(11));
  std::vector<iovec> iov;
  for (size_t i : order) {
    iov.push_back({low.page(i), kPage});
    iov.push_back({high.page(kPages / 2 - 1 - i), kPage});
  }

  const CountedImport c = import_counted(h, iov);
  CHECK(h.ctx().stats().last_userptr_strategy == UserptrStrategy::kUdmabuf);
  CHECK(c.after.udmabufs_created - c.before.udmabufs_created == 2);
  CHECK(c.after.dmabuf_imports - c.before.dmabuf_imports == 2);
  CHECK(c.ioctls == 4);
  CHECK(h.ctx().stats().last_userptr_objects == 2);
  CHECK(c.after.bytes_copied == c.before.bytes_copied);

  CHECK(gpu_mismatched_pages(h, c.res, iov, 2246822519u, 3) == 0);
}

TEST_CASE("userptr: udmabufs beyond the object allowance are never made", "[context][userptr]") {
  // One object left: 2048 scattered sealed pages would need two udmabufs, so the import takes
  // the alias (one object) and no udmabuf is created, not even one that is closed again.
  Config c = test_config();
  c.limits.max_objects = 1;
  ContextHarness h(c);
  h.create_shmem();
  constexpr size_t kPages = 2048;
  GuestRam ram(2 * kPages * kPage);
  REQUIRE(fcntl(ram.fd.get(), F_ADD_SEALS, F_SEAL_SHRINK) == 0);
  std::vector<iovec> iov;
  for (size_t i = 0; i < kPages; ++i)
    iov.push_back({ram.page(2 * (kPages - 1 - i)), kPage});
  const auto before = emu_counters();
  int err;
  userptr_blob(h, iov, &err);
  REQUIRE(err == 0);
  const auto after = emu_counters();
  CHECK(h.ctx().stats().last_userptr_strategy == UserptrStrategy::kAlias);
  CHECK(after.udmabufs_created == before.udmabufs_created);
  CHECK(after.bos_created - before.bos_created == 1);
  CHECK(h.ctx().stats().last_userptr_objects == 1);
}

TEST_CASE("userptr: the import is chosen by cost", "[context][userptr]") {
  UserptrOptions o;
  // 64 MiB of 4 KiB pieces: 16384 mmaps against 16 udmabufs of pinning.
  CHECK(choose_file_import(16384, 64ull << 20, true, true, o) == UserptrStrategy::kUdmabuf);
  // 1 GiB in 2 MiB pieces: 512 mmaps against pinning 262144 pages.
  CHECK(choose_file_import(512, 1ull << 30, true, true, o) == UserptrStrategy::kAlias);
  // Only one possible, or neither.
  CHECK(choose_file_import(512, 1ull << 30, false, true, o) == UserptrStrategy::kUdmabuf);
  CHECK(choose_file_import(16384, 64ull << 20, true, false, o) == UserptrStrategy::kAlias);
  CHECK(choose_file_import(16, 1 << 20, false, false, o) == UserptrStrategy::kStitched);
  // udmabuf would need more objects than allowed: the alias (one object).
  o.max_objects = 8;
  CHECK(choose_file_import(16384, 64ull << 20, true, true, o) == UserptrStrategy::kAlias);
}
