// Issue 16's cost model changed how the emulator reaches caller memory, wakes sleepers, builds
// udmabufs and validates userptrs; these pin down that what a program can observe stayed the
// kernel's: EFAULT for every address that is not mapped (the stack shortcut included), the right
// wait returning for each of many concurrent waiters, udmabuf contents and error order with merged
// items, userptr validation over many VMAs.
#include <linux/udmabuf.h>
#include <pthread.h>
#include <sys/mman.h>
#include <xf86drm.h>

#include <catch2/catch.hpp>
#include <array>
#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "core/emulator.h"

#include "emu_test_support.h"
#include "unmapped_memory.h"

using namespace rvgl::emu_test;

namespace {

// INFO ACCEL_WORKING with the request struct at `req` and the answer at `out`.
int accel_working(int fd, void *req_mem, uint32_t *out) {
  auto *req = static_cast<drm_amdgpu_info *>(req_mem);
  std::memset(req, 0, sizeof(*req));
  req->return_pointer = reinterpret_cast<uintptr_t>(out);
  req->return_size = 4;
  req->query = AMDGPU_INFO_ACCEL_WORKING;
  return xioctl(fd, DRM_IOCTL_AMDGPU_INFO, req);
}

// Runs on a stack we mapped ourselves with nothing mapped above it: a request struct straddling
// the end of the stack is EFAULT at copy-in. Nothing is written there (glibc keeps the thread's
// descriptor at the top of a caller-provided stack): whatever the bytes are, the copy must fail.
void *stack_edge_thread(void *arg) {
  Fd fd = open_render();
  pthread_attr_t attr;
  void *stack = nullptr;
  size_t size = 0;
  pthread_getattr_np(pthread_self(), &attr);
  pthread_attr_getstack(&attr, &stack, &size);
  pthread_attr_destroy(&attr);
  auto *top = static_cast<uint8_t *>(stack) + size;
  *static_cast<int *>(arg) = xioctl(fd.get(), DRM_IOCTL_AMDGPU_INFO, top - 16);
  return nullptr;
}

}  // namespace

TEST_CASE("ioctl arguments: stack, heap and another thread's stack work; unmapped is EFAULT",
          "[cost][acceptance]") {
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  alignas(8) uint8_t stack_req[sizeof(drm_amdgpu_info)];
  uint32_t answer = 0;
  CHECK(accel_working(fd.get(), stack_req, &answer) == 0);
  CHECK(answer == 1);

  auto heap_req = std::make_unique<drm_amdgpu_info>();
  auto heap_answer = std::make_unique<uint32_t>(0);
  CHECK(accel_working(fd.get(), heap_req.get(), heap_answer.get()) == 0);
  CHECK(*heap_answer == 1);

  // An address nothing is mapped at.
  void *gone = never_mapped();
  CHECK(accel_working(fd.get(), stack_req, static_cast<uint32_t *>(gone)) == -EFAULT);
  CHECK(xioctl(fd.get(), DRM_IOCTL_AMDGPU_INFO, gone) == -EFAULT);
  // A read-only page: copy-in works, the answer cannot be written.
  void *ro = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(ro != MAP_FAILED);
  CHECK(accel_working(fd.get(), stack_req, static_cast<uint32_t *>(ro)) == -EFAULT);
  munmap(ro, 4096);

  // Another thread hands in pointers into this thread's stack (mapped, not its own).
  uint32_t from_other = 0;
  int other_rc = 1;
  std::thread([&] { other_rc = accel_working(fd.get(), stack_req, &from_other); }).join();
  CHECK(other_rc == 0);
  CHECK(from_other == 1);

  // The end of this (main) thread's stack: an argument straddling it is EFAULT when nothing is
  // mapped above, as the kernel's copy_from_user reports it. The 16 bytes there (the end of the
  // initial process stack) are saved and put back.
  pthread_attr_t attr;
  void *stack = nullptr;
  size_t size = 0;
  REQUIRE(pthread_getattr_np(pthread_self(), &attr) == 0);
  REQUIRE(pthread_attr_getstack(&attr, &stack, &size) == 0);
  pthread_attr_destroy(&attr);
  auto *top = static_cast<uint8_t *>(stack) + size;
  const bool above_unmapped = page_unmapped(top);
  uint8_t saved[16];
  std::memcpy(saved, top - 16, 16);
  // The request's first 16 bytes (return_pointer, return_size, query) below the end, the rest
  // past it.
  const uint64_t ret = reinterpret_cast<uintptr_t>(&answer);
  const uint32_t ret_size = 4, query = AMDGPU_INFO_ACCEL_WORKING;
  std::memcpy(top - 16, &ret, 8);
  std::memcpy(top - 8, &ret_size, 4);
  std::memcpy(top - 4, &query, 4);
  const int straddling_request = xioctl(fd.get(), DRM_IOCTL_AMDGPU_INFO, top - 16);
  // A request inside the stack, the answer straddling its end.
  const int straddling_answer =
      accel_working(fd.get(), stack_req, reinterpret_cast<uint32_t *>(top - 2));
  std::memcpy(top - 16, saved, 16);
  if (above_unmapped) {
    CHECK(straddling_request == -EFAULT);
    CHECK(straddling_answer == -EFAULT);
  } else {
    CHECK(straddling_request == 0);  // mapped memory above: the kernel copies it
  }

  // A thread whose stack ends at an unmapped page.
  constexpr size_t kStackPages = 1024;  // 4 MiB: sanitizer runtimes want more than 256 KiB
  const auto edge_rc = with_hole(kStackPages + 1, kStackPages, [](uint8_t *region) {
    pthread_attr_t edge;
    int rc = 1;
    pthread_t t;
    if (pthread_attr_init(&edge) != 0) return 1;
    if (pthread_attr_setstack(&edge, region, kStackPages * 4096) == 0 &&
        pthread_create(&t, &edge, stack_edge_thread, &rc) == 0)
      pthread_join(t, nullptr);
    pthread_attr_destroy(&edge);
    return rc;
  });
  REQUIRE(edge_rc.has_value());
  CHECK(*edge_rc == -EFAULT);
}

TEST_CASE("many threads waiting on their own syncobjs each wake for theirs", "[cost][syncobj]") {
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  constexpr int kWaiters = 32;
  for (int round = 0; round < 10; ++round) {
    std::vector<uint32_t> so(kWaiters);
    for (auto &h : so)
      REQUIRE(drmSyncobjCreate(fd.get(), 0, &h) == 0);
    std::atomic<int> woke{0};
    std::vector<int> rc(kWaiters, 1);
    std::vector<std::thread> threads;
    for (int i = 0; i < kWaiters; ++i)
      threads.emplace_back([&, i] {
        uint32_t h = so[i];
        rc[i] = drmSyncobjWait(fd.get(), &h, 1, abs_timeout_ms(10000),
                               DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, nullptr);
        woke.fetch_add(1);
      });
    // Signal in an order unrelated to the start order; one waiter of each pair at a time.
    for (int i = 0; i < kWaiters; ++i) {
      uint32_t h = so[(i * 7) % kWaiters];
      REQUIRE(drmSyncobjSignal(fd.get(), &h, 1) == 0);
    }
    for (auto &t : threads)
      t.join();
    CHECK(woke.load() == kWaiters);
    for (int i = 0; i < kWaiters; ++i)
      CHECK(rc[i] == 0);
    // A waiter whose syncobj is never signalled times out, whatever happens to the others.
    uint32_t other = so[0], never_signalled = 0;
    REQUIRE(drmSyncobjCreate(fd.get(), 0, &never_signalled) == 0);
    int late = 1;
    std::thread quiet([&] {
      uint32_t h = never_signalled;
      late = drmSyncobjWait(fd.get(), &h, 1, abs_timeout_ms(50),
                            DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, nullptr);
    });
    for (int i = 0; i < 20; ++i)
      REQUIRE(drmSyncobjSignal(fd.get(), &other, 1) == 0);
    quiet.join();
    CHECK(late == -ETIME);
    drmSyncobjDestroy(fd.get(), never_signalled);
    for (auto h : so)
      drmSyncobjDestroy(fd.get(), h);
  }
}

TEST_CASE("udmabuf items of one memfd: adjacent ones merged, contents in list order",
          "[cost][udmabuf]") {
  Fd dev(open("/dev/udmabuf", O_RDWR | O_CLOEXEC));
  REQUIRE(dev.get() >= 0);
  Fd m(memfd_create("guest-ram", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  REQUIRE(m.get() >= 0);
  constexpr uint32_t kPages = 64;
  REQUIRE(ftruncate(m.get(), kPages * 4096) == 0);
  REQUIRE(fcntl(m.get(), F_ADD_SEALS, F_SEAL_SHRINK) == 0);
  auto *pages = static_cast<uint32_t *>(
      mmap(nullptr, kPages * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, m.get(), 0));
  REQUIRE(pages != MAP_FAILED);
  for (uint32_t p = 0; p < kPages; ++p)
    pages[p * 1024] = 0x1000 + p;

  // Pages 10..19 in order (adjacent: one piece), then 5, then 40..42, then 5 again.
  std::vector<uint32_t> order;
  for (uint32_t p = 10; p < 20; ++p)
    order.push_back(p);
  order.insert(order.end(), {5, 40, 41, 42, 5});
  std::vector<uint8_t> buf(sizeof(udmabuf_create_list) +
                           order.size() * sizeof(udmabuf_create_item));
  auto *l = reinterpret_cast<udmabuf_create_list *>(buf.data());
  l->flags = UDMABUF_FLAGS_CLOEXEC;
  l->count = static_cast<uint32_t>(order.size());
  for (size_t i = 0; i < order.size(); ++i)
    l->list[i] = udmabuf_create_item{static_cast<uint32_t>(m.get()), 0, order[i] * 4096ull, 4096};
  Fd ub(xioctl(dev.get(), UDMABUF_CREATE_LIST, l));
  REQUIRE(ub.get() >= 0);
  CHECK(lseek(ub.get(), 0, SEEK_END) == static_cast<off_t>(order.size() * 4096));
  auto *view = static_cast<uint32_t *>(
      mmap(nullptr, order.size() * 4096, PROT_READ, MAP_SHARED, ub.get(), 0));
  REQUIRE(view != MAP_FAILED);
  for (size_t i = 0; i < order.size(); ++i)
    CHECK(view[i * 1024] == 0x1000 + order[i]);
  munmap(view, order.size() * 4096);

  // Errors come from the first failing item, in list order, whatever was checked before.
  l->list[3].offset = kPages * 4096ull;  // past the end
  l->list[6].memfd = 1000;               // not open
  CHECK(xioctl(dev.get(), UDMABUF_CREATE_LIST, l) == -EINVAL);
  l->list[3].offset = 3 * 4096ull;
  CHECK(xioctl(dev.get(), UDMABUF_CREATE_LIST, l) == -EBADF);
  munmap(pages, kPages * 4096);
}

TEST_CASE("userptr VALIDATE walks every VMA of the range", "[cost][userptr]") {
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  constexpr size_t kPages = 64;
  auto *mem = static_cast<uint8_t *>(
      mmap(nullptr, kPages * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(mem != MAP_FAILED);
  const uint32_t rw =
      AMDGPU_GEM_USERPTR_ANONONLY | AMDGPU_GEM_USERPTR_VALIDATE | AMDGPU_GEM_USERPTR_REGISTER;
  const uint32_t ro = rw | AMDGPU_GEM_USERPTR_READONLY;
  // Alternate PROT_READ|PROT_EXEC and PROT_READ|PROT_WRITE|PROT_EXEC: 64 VMAs that cannot merge.
  for (size_t p = 0; p < kPages; p += 2)
    REQUIRE(mprotect(mem + p * 4096, 4096, PROT_READ | PROT_EXEC) == 0);
  uint32_t h = 0;
  CHECK(gem_userptr(fd.get(), mem, kPages * 4096, rw, &h) == -EPERM);  // read-only VMAs
  REQUIRE(gem_userptr(fd.get(), mem, kPages * 4096, ro, &h) == 0);
  gem_close(fd.get(), h);
  // Writable pages only: the odd ones, one at a time.
  REQUIRE(gem_userptr(fd.get(), mem + 4096, 4096, rw, &h) == 0);
  gem_close(fd.get(), h);
  munmap(mem, kPages * 4096);
  // A hole in the middle.
  const auto rcs = with_hole(kPages, 32, [&](uint8_t *region) {
    std::array<int, 3> r{};
    r[0] = gem_userptr(fd.get(), region, kPages * 4096, ro, &h);
    r[1] = gem_userptr(fd.get(), region + 32 * 4096, 4096, ro, &h);
    r[2] = gem_userptr(fd.get(), region + 33 * 4096, 31 * 4096, ro, &h);
    if (r[2] == 0) gem_close(fd.get(), h);
    return r;
  });
  REQUIRE(rcs.has_value());
  CHECK((*rcs)[0] == -EFAULT);
  CHECK((*rcs)[1] == -EFAULT);
  CHECK((*rcs)[2] == 0);
}

// The kernel looks a context up under the file's ctx_mgr lock and reads its fence ring under
// ctx->ring_lock (amdgpu_ctx.c), never under a lock a CS holds for its whole length: a health
// check (WAIT_CS, WAIT_FENCES, CTX QUERY_STATE2) on one thread must not wait for a CS in progress
// on another. White box: this thread holds the emulator's state lock, as a CS does throughout.
TEST_CASE("WAIT_CS, WAIT_FENCES and CTX answer while a CS holds the state lock", "[cost][lock]") {
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  uint32_t ctx = 0;
  REQUIRE(ctx_create(fd.get(), &ctx) == 0);
  GpuBuffer buf;
  REQUIRE(buf.create(fd.get(), 4096, 0x100000) == 0);
  std::vector<uint32_t> ib;
  sdma::fence(ib, buf.va + 2048, 7);
  uint64_t seq = 0;
  REQUIRE(submit(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, place_ib(buf, 0, ib), ib.size() * 4, &seq) ==
          0);
  REQUIRE(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == 0);

  for (int what = 0; what < 3; ++what) {
    INFO("ioctl " << (what == 0 ? "WAIT_CS" : what == 1 ? "WAIT_FENCES" : "CTX QUERY_STATE2"));
    std::unique_lock state(rvgl::emu::Emulator::get().mutex());
    auto answer = std::async(std::launch::async, [&] {
      if (what == 0) return wait_cs(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, seq, 0);
      if (what == 1) {
        drm_amdgpu_wait_fences_out out{};
        const int r = wait_fence(fd.get(), {ctx, AMDGPU_HW_IP_DMA, 0, 0, seq}, true, 0, &out);
        return r ? r : out.status == 1 ? 0 : -1;
      }
      return ctx_state2(fd.get(), ctx) == 0 ? 0 : -1;
    });
    const bool answered = answer.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
    state.unlock();  // a refused check must not leave the thread blocked
    CHECK(answered);
    CHECK(answer.get() == 0);
  }
  REQUIRE(ctx_free(fd.get(), ctx) == 0);
}
