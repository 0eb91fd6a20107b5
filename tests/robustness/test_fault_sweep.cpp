// Issue 7: fail each ioctl the context uses at each position of a scripted guest workload. Every
// run must end with the work done or the guest told (an errno or an event); the host stays up and
// the kernel is left with nothing of ours (LSan covers host memory in the sanitizer build).
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

#include "robustness/robust_support.h"

using namespace rvgl;
using namespace rvgl::test;
namespace pk = rvgl::packets;

namespace {

constexpr uint64_t kPage = 4096;

struct Outcome {
  bool data_ok = false;
  bool guest_told = false;  // an errno in a response / call, an event, or a lost queue
};

// The scripted guest: shared page, two BOs, a userptr blob, SDMA copy userptr -> BO, PM4 write,
// fences on two rings, then teardown. Any failure the guest can see ends the script early.
Outcome run_workload() {
  Outcome o;
  UniqueFd memfd(memfd_create("sweep-ram", MFD_CLOEXEC));
  if (!memfd || ftruncate(memfd.get(), 16 * kPage)) throw std::runtime_error("memfd");
  Mapping ram = Mapping::map_shared(memfd.get(), 16 * kPage, PROT_READ | PROT_WRITE);
  for (uint32_t i = 0; i < 4 * kPage / 4; ++i)
    ram.as<uint32_t>()[i] = i * 3 + 1;
  try {
    ContextHarness h(test_config(), false, 77);
    h.create_shmem();
    const uint64_t va = h.capset().va_start;
    auto dst = h.mapped_bo(4 * kPage);
    auto ib = h.mapped_bo(kPage);
    BlobArgs a;
    a.res_id = h.next_res_id();
    a.blob_mem = RVGL_BLOB_MEM_GUEST;
    a.blob_flags = RVGL_BLOB_FLAG_USERPTR;
    a.size = 4 * kPage;
    const iovec iov{ram.get(), 4 * kPage};
    a.iov = {&iov, 1};
    BlobExport e;
    if (h.ctx().create_blob(a, &e)) return {false, true};
    int32_t r;
    auto told = [&](int32_t res) {
      if (res) o.guest_told = true;
      return res != 0;
    };
    if (told(h.va_map(dst.bo, 0, 0, va, 4 * kPage))) return o;
    if (told(h.va_map(0, a.res_id, 0, va + (1 << 20), 4 * kPage))) return o;
    if (told(h.va_map(ib.bo, 0, 0, va + (2 << 20), kPage))) return o;
    const uint32_t sdma = h.queue_create(RVGL_IP_SDMA, 1, &r);
    if (told(r)) return o;
    const uint32_t compute = h.queue_create(RVGL_IP_COMPUTE, 2, &r);
    if (told(r)) return o;
    std::vector<uint32_t> copy;
    pk::sdma_copy_linear(copy, va, va + (1 << 20), 4 * kPage - 16);
    pk::sdma_pad(copy);
    const uint64_t seq =
        h.submit(sdma, {ContextHarness::write_ib(ib, va + (2 << 20), copy)}, {}, &r);
    if (told(r)) return o;
    std::vector<uint32_t> w;
    pk::pm4_write_data(w, va + 4 * kPage - 16, {0xfeedu, 0xbeefu});
    h.submit(compute, {ContextHarness::write_ib(ib, va + (2 << 20), w, 2048)}, {{sdma, 0, seq}},
             &r);
    if (told(r)) return o;
    if (h.fence(1, 1) || h.fence(2, 2)) return {false, true};
    const bool fenced = h.wait_fence(1, 1, 3000) && h.wait_fence(2, 2, 3000);
    for (uint32_t q : {sdma, compute}) {
      auto st = h.queue_state(q);
      if (st.hdr.result || st.state != RVGL_QUEUE_STATE_OK) o.guest_told = true;
    }
    if (!read_events(h).empty()) o.guest_told = true;
    if (!fenced) return o;  // neither done nor told: the assertion below catches it
    o.data_ok = std::memcmp(dst.ptr(), ram.get(), 4 * kPage - 16) == 0 &&
                dst.ptr<uint32_t>()[kPage - 4] == 0xfeedu;
    told(h.va_unmap(va, 4 * kPage));
    told(h.bo_free(dst.bo));
    told(h.queue_destroy(sdma));
    h.ctx().detach_resource(a.res_id);
  } catch (const std::runtime_error &) {
    o.guest_told = true;  // a blob or context call failed: the VMM got the errno
  }
  return o;
}

}  // namespace

TEST_CASE("fault-injection sweep over every ioctl of a guest workload", "[robust][sweep]") {
  rvgl_emu_reset_fault_injection();
  const auto clean = run_workload();
  REQUIRE(clean.data_ok);
  const auto base = emu_counters();

  const char *ioctls[] = {"VERSION",
                          "INFO",
                          "PROFILER",
                          "GEM_CREATE",
                          "GEM_CLOSE",
                          "GEM_MMAP",
                          "GEM_USERPTR",
                          "GEM_VA",
                          "PRIME_HANDLE_TO_FD",
                          "CTX",
                          "CS",
                          "WAIT_CS",
                          "SYNCOBJ_CREATE",
                          "SYNCOBJ_DESTROY",
                          "SYNCOBJ_QUERY",
                          "SYNCOBJ_TIMELINE_WAIT",
                          "SYNCOBJ_TIMELINE_SIGNAL"};
  uint64_t runs = 0, injected = 0, told = 0, succeeded = 0;
  for (const char *name : ioctls) {
    for (uint32_t n = 1; n <= 64; ++n) {
      rvgl_emu_reset_fault_injection();
      const std::string rule = std::string(name) + ":" + std::to_string(n) + ":EIO";
      REQUIRE(rvgl_emu_set_knob("RVGL_EMU_FAIL", rule.c_str()) == 0);
      const auto before = emu_counters().injected_failures;
      const Outcome o = run_workload();
      const auto fired = emu_counters().injected_failures - before;
      rvgl_emu_reset_fault_injection();
      if (fired == 0) break;  // the workload makes fewer than n such calls
      ++runs;
      injected += fired;
      told += o.guest_told;
      succeeded += o.data_ok;
      INFO(rule);
      CHECK((o.data_ok || o.guest_told));
      // Nothing of ours is left in the kernel once the run's context is gone.
      // (A job the kernel still runs holds its context until it finishes.)
      CHECK(wait_for([&] {
        const auto c = emu_counters();
        return c.bos_alive == base.bos_alive && c.contexts_alive == base.contexts_alive &&
               c.syncobjs_alive == base.syncobjs_alive &&
               c.device_files_open == base.device_files_open;
      }));
    }
  }
  std::printf(
      "fault sweep: %llu runs, %llu failures injected, %llu told the guest, %llu completed\n",
      static_cast<unsigned long long>(runs), static_cast<unsigned long long>(injected),
      static_cast<unsigned long long>(told), static_cast<unsigned long long>(succeeded));
  CHECK(runs >= 40);
}
