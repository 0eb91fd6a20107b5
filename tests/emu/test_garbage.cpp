// Garbage in: every ioctl the node knows, and numbers it does not, with random argument bytes and
// random pointers. The emulator must answer each with a result or an errno and keep working.

#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "emu_test_support.h"
#include "support/open_fds.h"

using namespace rvgl::emu_test;

namespace {

// The requests a render node answers (their sizes and directions as the headers define them).
const unsigned long kRequests[] = {
    DRM_IOCTL_VERSION,
    DRM_IOCTL_GET_CAP,
    DRM_IOCTL_GEM_CLOSE,
    DRM_IOCTL_PRIME_HANDLE_TO_FD,
    DRM_IOCTL_PRIME_FD_TO_HANDLE,
    DRM_IOCTL_SYNCOBJ_CREATE,
    DRM_IOCTL_SYNCOBJ_DESTROY,
    DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD,
    DRM_IOCTL_SYNCOBJ_FD_TO_HANDLE,
    DRM_IOCTL_SYNCOBJ_WAIT,
    DRM_IOCTL_SYNCOBJ_RESET,
    DRM_IOCTL_SYNCOBJ_SIGNAL,
    DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT,
    DRM_IOCTL_SYNCOBJ_QUERY,
    DRM_IOCTL_SYNCOBJ_TRANSFER,
    DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL,
    DRM_IOCTL_AMDGPU_GEM_CREATE,
    DRM_IOCTL_AMDGPU_GEM_MMAP,
    DRM_IOCTL_AMDGPU_CTX,
    DRM_IOCTL_AMDGPU_BO_LIST,
    DRM_IOCTL_AMDGPU_CS,
    DRM_IOCTL_AMDGPU_INFO,
    DRM_IOCTL_AMDGPU_GEM_METADATA,
    DRM_IOCTL_AMDGPU_GEM_WAIT_IDLE,
    DRM_IOCTL_AMDGPU_GEM_VA,
    DRM_IOCTL_AMDGPU_WAIT_CS,
    DRM_IOCTL_AMDGPU_GEM_OP,
    DRM_IOCTL_AMDGPU_WAIT_FENCES,
    DRM_IOCTL_AMDGPU_VM,
    DRM_IOCTL_AMDGPU_FENCE_TO_HANDLE,
    RVGL_DRM_IOCTL_AMDGPU_USERQ,
    RVGL_DRM_IOCTL_AMDGPU_PROFILER,
};

}  // namespace

TEST_CASE("random ioctls never crash the emulator", "[garbage]") {
  Knob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "20", "2000");
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  std::mt19937_64 rng(0x5eed);
  // Pointers a caller could pass: null, small, unmapped, into a scratch arena.
  std::vector<uint8_t> arena(1 << 16, 0);
  void *hole = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  auto pointer = [&]() -> uint64_t {
    switch (rng() % 4) {
      case 0:
        return 0;
      case 1:
        return rng() % 4096;
      case 2:
        return reinterpret_cast<uintptr_t>(hole);
      default:
        return reinterpret_cast<uintptr_t>(arena.data()) + (rng() % (arena.size() - 512));
    }
  };
  const std::set<int> before = rvgl::test::open_fds();
  int answered = 0;
  for (int i = 0; i < 4000; ++i) {
    unsigned long req = kRequests[rng() % std::size(kRequests)];
    if (rng() % 8 == 0)  // a number the table does not know, or a foreign type
      req = (rng() % 2) ? DRM_IOWR(rng() % 0x100, drm_amdgpu_info) : _IOWR('x', rng() % 256, int);
    uint64_t args[16];
    for (auto &w : args)
      w = (rng() % 3 == 0) ? pointer() : rng() % 16;
    const size_t at = rng() % (arena.size() - 512);
    for (size_t b = 0; b < 512; b += 8) {
      const uint64_t v = rng();
      std::memcpy(arena.data() + at + b, &v, 8);
    }
    // Waits must not block forever: their timeout words are absolute times (0 polls).
    if (req == DRM_IOCTL_SYNCOBJ_WAIT) reinterpret_cast<drm_syncobj_wait *>(args)->timeout_nsec = 0;
    if (req == DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT)
      reinterpret_cast<drm_syncobj_timeline_wait *>(args)->timeout_nsec = 0;
    if (req == DRM_IOCTL_AMDGPU_WAIT_CS)
      reinterpret_cast<drm_amdgpu_wait_cs *>(args)->in.timeout = 0;
    if (req == DRM_IOCTL_AMDGPU_WAIT_FENCES)
      reinterpret_cast<drm_amdgpu_wait_fences *>(args)->in.timeout_ns = 0;
    if (req == DRM_IOCTL_AMDGPU_GEM_WAIT_IDLE)
      reinterpret_cast<drm_amdgpu_gem_wait_idle *>(args)->in.timeout = 0;
    if (req == RVGL_DRM_IOCTL_AMDGPU_PROFILER)
      reinterpret_cast<rvgl_drm_amdgpu_profiler_args *>(args)->data.spm.timeout = 0;
    void *arg = (rng() % 16 == 0) ? reinterpret_cast<void *>(pointer()) : args;
    const int r = ioctl(fd.get(), req, arg);
    if (r > 2) close(r);  // an fd came back (PRIME, syncobj, sync file)
    ++answered;
  }
  CHECK(answered == 4000);
  munmap(hole, 4096);
  // Fds the calls handed out inside their argument structs (PRIME, syncobj, sync files).
  for (int f : rvgl::test::open_fds())
    if (!before.count(f)) close(f);
  // Still a working device afterwards.
  GpuBuffer buf;
  REQUIRE(buf.create(fd.get(), 4096, 0x7f000000) == 0);
  uint32_t ctx = 0;
  REQUIRE(ctx_create(fd.get(), &ctx) == 0);
  std::vector<uint32_t> ib;
  sdma::fence(ib, buf.va + 2048, 0x1234);
  uint64_t seq;
  REQUIRE(submit(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, place_ib(buf, 0, ib), ib.size() * 4, &seq) ==
          0);
  CHECK(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == 0);
  CHECK(buf.u32()[512] == 0x1234);
}
