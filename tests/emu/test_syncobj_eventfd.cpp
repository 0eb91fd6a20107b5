// Point 10 of issue 16: DRM_IOCTL_SYNCOBJ_EVENTFD (Linux 6.6), written from the kernel's
// drm_syncobj_eventfd_ioctl() and syncobj_eventfd_entry_func() (drivers/gpu/drm/drm_syncobj.c):
// 1 is added to the eventfd when the point is signalled (or, with WAIT_AVAILABLE, once it has a
// fence), also when the point is submitted after the registration; RVGL_EMU_NO_SYNCOBJ_EVENTFD=1
// answers as a kernel without the ioctl (drm_ioctl: an unknown core number is EINVAL).
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <xf86drm.h>

#include <catch2/catch.hpp>

#include "emu_test_support.h"

using namespace rvgl::emu_test;

namespace {

// include/uapi/drm/drm.h (Linux 6.6); libdrm 2.4.114's drm.h predates it.
struct SyncobjEventfd {
  uint32_t handle;
  uint32_t flags;
  uint64_t point;
  int32_t fd;
  uint32_t pad;
};
static_assert(sizeof(SyncobjEventfd) == 24);
const unsigned long kIoctlSyncobjEventfd = DRM_IOWR(0xCF, SyncobjEventfd);

int register_eventfd(int fd, uint32_t handle, uint64_t point, int efd, uint32_t flags = 0,
                     uint32_t pad = 0) {
  SyncobjEventfd a{handle, flags, point, efd, pad};
  return xioctl(fd, kIoctlSyncobjEventfd, &a);
}

// The eventfd's counter without blocking (0: not signalled).
uint64_t take(int efd) {
  uint64_t v = 0;
  return read(efd, &v, sizeof(v)) == sizeof(v) ? v : 0;
}

// Waits for the eventfd to turn readable (the job runs on an emulator thread), then takes it.
uint64_t wait_take(int efd) {
  pollfd p{efd, POLLIN, 0};
  if (poll(&p, 1, 5000) != 1) return 0;
  return take(efd);
}

struct Rig {
  Fd fd = open_render();
  GpuBuffer buf;
  uint32_t ctx = 0;
  Fd efd{eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
  Rig() {
    REQUIRE(fd.get() >= 0);
    REQUIRE(efd.get() >= 0);
    REQUIRE(buf.create(fd.get(), 64 * 1024, 0x800000) == 0);
    REQUIRE(ctx_create(fd.get(), &ctx) == 0);
  }
  // A binary syncobj created signalled, destroyed with the rig.
  uint32_t signalled_syncobj() {
    uint32_t h = 0;
    REQUIRE(drmSyncobjCreate(fd.get(), DRM_SYNCOBJ_CREATE_SIGNALED, &h) == 0);
    syncobjs.push_back(h);
    return h;
  }
  ~Rig() {
    for (uint32_t h : syncobjs)
      drmSyncobjDestroy(fd.get(), h);
  }
  std::vector<uint32_t> syncobjs;
  // An SDMA job that waits until the CPU writes 1 at buf[4000 bytes], then signals `chunks`.
  void blocked_job(const std::vector<drm_amdgpu_cs_chunk> &chunks, uint32_t ib_off = 0) {
    buf.u32()[1000] = 0;
    std::vector<uint32_t> ib;
    sdma::poll_mem_equal(ib, buf.va + 4000, 1);
    sdma::fence(ib, buf.va + 64, 7);
    uint64_t seq = 0;
    REQUIRE(submit(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, place_ib(buf, ib_off, ib), ib.size() * 4,
                   &seq, chunks) == 0);
  }
  void release() { __atomic_store_n(&buf.u32()[1000], 1u, __ATOMIC_RELEASE); }
};

drm_amdgpu_cs_chunk chunk(uint32_t id, const void *data, size_t bytes) {
  return {id, static_cast<uint32_t>(bytes / 4), reinterpret_cast<uintptr_t>(data)};
}

}  // namespace

TEST_CASE("SYNCOBJ_EVENTFD on a binary syncobj fires when the job signalling it completes",
          "[syncobj][eventfd][acceptance]") {
  Rig r;
  const int fd = r.fd.get();
  // Looped: the registration races nothing, but the signal comes from the ring worker.
  for (int round = 0; round < 20; ++round) {
    uint32_t so = 0;
    REQUIRE(drmSyncobjCreate(fd, 0, &so) == 0);
    // Registered before anything is submitted: the kernel keeps the entry on the syncobj.
    REQUIRE(register_eventfd(fd, so, 0, r.efd.get()) == 0);
    CHECK(take(r.efd.get()) == 0);
    drm_amdgpu_cs_chunk_sem out{so};
    r.blocked_job({chunk(AMDGPU_CHUNK_ID_SYNCOBJ_OUT, &out, sizeof(out))});
    CHECK(take(r.efd.get()) == 0);  // submitted, not signalled
    r.release();
    CHECK(wait_take(r.efd.get()) == 1);
    CHECK(take(r.efd.get()) == 0);  // once per registration
    REQUIRE(drmSyncobjDestroy(fd, so) == 0);
  }
}

TEST_CASE("SYNCOBJ_EVENTFD with WAIT_AVAILABLE fires at submission", "[syncobj][eventfd]") {
  Rig r;
  const int fd = r.fd.get();
  uint32_t so = 0;
  REQUIRE(drmSyncobjCreate(fd, 0, &so) == 0);
  REQUIRE(register_eventfd(fd, so, 0, r.efd.get(), DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE) == 0);
  CHECK(take(r.efd.get()) == 0);
  drm_amdgpu_cs_chunk_sem out{so};
  r.blocked_job({chunk(AMDGPU_CHUNK_ID_SYNCOBJ_OUT, &out, sizeof(out))});
  CHECK(take(r.efd.get()) == 1);  // the fence exists: available, though the job still waits
  // A plain registration now follows that fence.
  REQUIRE(register_eventfd(fd, so, 0, r.efd.get()) == 0);
  CHECK(take(r.efd.get()) == 0);
  r.release();
  CHECK(wait_take(r.efd.get()) == 1);
  drmSyncobjDestroy(fd, so);
}

TEST_CASE("SYNCOBJ_EVENTFD on timeline points", "[syncobj][eventfd][acceptance]") {
  Rig r;
  const int fd = r.fd.get();
  uint32_t tl = 0;
  REQUIRE(drmSyncobjCreate(fd, 0, &tl) == 0);
  const int efd = r.efd.get();
  Fd avail{eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
  REQUIRE(register_eventfd(fd, tl, 5, efd) == 0);
  REQUIRE(register_eventfd(fd, tl, 5, avail.get(), DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE) == 0);
  uint64_t p3 = 3;
  REQUIRE(drmSyncobjTimelineSignal(fd, &tl, &p3, 1) == 0);
  CHECK(take(efd) == 0);  // point 3 does not cover 5
  CHECK(take(avail.get()) == 0);

  // Point 5 from a job: available at submission, signalled at completion.
  drm_amdgpu_cs_chunk_syncobj sig{tl, 0, 5};
  r.blocked_job({chunk(AMDGPU_CHUNK_ID_SYNCOBJ_TIMELINE_SIGNAL, &sig, sizeof(sig))});
  CHECK(take(avail.get()) == 1);
  CHECK(take(efd) == 0);
  r.release();
  CHECK(wait_take(efd) == 1);

  // Points already signalled (at or below the last) fire at registration.
  REQUIRE(register_eventfd(fd, tl, 4, efd) == 0);
  CHECK(take(efd) == 1);
  drmSyncobjDestroy(fd, tl);
}

TEST_CASE("SYNCOBJ_EVENTFD on a signalled syncobj fires at once; the kernel keeps the eventfd",
          "[syncobj][eventfd]") {
  Rig r;
  const int fd = r.fd.get();
  const uint32_t so = r.signalled_syncobj();
  const rvgl_emu_counters before = counters();
  REQUIRE(register_eventfd(fd, so, 0, r.efd.get()) == 0);
  CHECK(take(r.efd.get()) == 1);

  // The entry holds the eventfd itself, not the caller's fd number.
  uint32_t later = 0;
  REQUIRE(drmSyncobjCreate(fd, 0, &later) == 0);
  const int dup_fd = dup(r.efd.get());
  REQUIRE(dup_fd >= 0);
  REQUIRE(register_eventfd(fd, later, 0, dup_fd) == 0);
  close(dup_fd);
  REQUIRE(drmSyncobjSignal(fd, &later, 1) == 0);
  CHECK(take(r.efd.get()) == 1);

  // Destroying a syncobj drops its entries unsignalled.
  uint32_t gone = 0;
  REQUIRE(drmSyncobjCreate(fd, 0, &gone) == 0);
  REQUIRE(register_eventfd(fd, gone, 0, r.efd.get()) == 0);
  REQUIRE(drmSyncobjDestroy(fd, gone) == 0);
  CHECK(take(r.efd.get()) == 0);
  drmSyncobjDestroy(fd, later);

  // The benchmarks' counts (registrations per op, signals per op): three registered, two fired.
  const rvgl_emu_counters after = counters();
  CHECK(after.syncobj_eventfds_registered - before.syncobj_eventfds_registered == 3);
  CHECK(after.syncobj_eventfds_signalled - before.syncobj_eventfds_signalled == 2);
}

TEST_CASE("SYNCOBJ_EVENTFD refuses what the kernel refuses", "[syncobj][eventfd][acceptance]") {
  Rig r;
  const int fd = r.fd.get();
  uint32_t so = 0;
  REQUIRE(drmSyncobjCreate(fd, 0, &so) == 0);
  const int efd = r.efd.get();
  const rvgl_emu_counters before = counters();
  CHECK(register_eventfd(fd, so, 0, efd, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL) == -EINVAL);
  CHECK(register_eventfd(fd, so, 0, efd, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT) == -EINVAL);
  CHECK(register_eventfd(fd, so, 0, efd, 0, 1) == -EINVAL);  // pad
  CHECK(register_eventfd(fd, so + 100, 0, efd) == -ENOENT);
  CHECK(register_eventfd(fd, so, 0, -1) == -EBADF);
  const int closed = dup(efd);
  REQUIRE(closed >= 0);
  close(closed);
  CHECK(register_eventfd(fd, so, 0, closed) == -EBADF);
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  CHECK(register_eventfd(fd, so, 0, pipe_fds[0]) == -EINVAL);  // not an eventfd
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  CHECK(register_eventfd(fd, so, 0, fd) == -EINVAL);  // a DRM fd is not an eventfd either
  // Flags are checked before the handle (the kernel's order).
  CHECK(register_eventfd(fd, so + 100, 0, efd, 1u << 7) == -EINVAL);
  // The handle before the fd.
  CHECK(register_eventfd(fd, so + 100, 0, -1) == -ENOENT);
  CHECK(counters().syncobj_eventfds_registered == before.syncobj_eventfds_registered);
  drmSyncobjDestroy(fd, so);
}

// The emulator keeps the eventfds a file registered (a re-arm costs what the kernel's
// eventfd_ctx_fdget() does, not a /proc path walk and a dup), so it must notice when a number it
// knows names another file: closed (EBADF), or reused for something that is not an eventfd.
TEST_CASE("SYNCOBJ_EVENTFD checks a known fd number again when it names another file",
          "[syncobj][eventfd]") {
  Rig r;
  const int fd = r.fd.get();
  const uint32_t so = r.signalled_syncobj();
  // Re-arming one eventfd many times: every registration fires once, none is lost or doubled.
  uint64_t fired = 0;
  for (int i = 0; i < 200; ++i) {
    REQUIRE(register_eventfd(fd, so, 0, r.efd.get()) == 0);
    fired += take(r.efd.get());
  }
  CHECK(fired == 200);

  int num = dup(r.efd.get());
  REQUIRE(num >= 0);
  REQUIRE(register_eventfd(fd, so, 0, num) == 0);
  CHECK(take(r.efd.get()) == 1);
  close(num);
  CHECK(register_eventfd(fd, so, 0, num) == -EBADF);
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  REQUIRE(dup2(pipe_fds[0], num) == num);  // the known number is now a pipe
  CHECK(register_eventfd(fd, so, 0, num) == -EINVAL);
  Fd other{eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
  REQUIRE(dup2(other.get(), num) == num);  // and now another eventfd: that one is signalled
  REQUIRE(register_eventfd(fd, so, 0, num) == 0);
  CHECK(take(other.get()) == 1);
  CHECK(take(r.efd.get()) == 0);
  close(num);
  // close_range over a known number forgets it too.
  const int ranged = dup(r.efd.get());
  REQUIRE(ranged >= 0);
  REQUIRE(register_eventfd(fd, so, 0, ranged) == 0);
  CHECK(take(r.efd.get()) == 1);
  REQUIRE(close_range(static_cast<unsigned>(ranged), static_cast<unsigned>(ranged), 0) == 0);
  CHECK(register_eventfd(fd, so, 0, ranged) == -EBADF);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

// A number closed around libc (a raw syscall the interposer cannot see) and then taken by one of
// the emulator's own files must not answer with the eventfd that was known there.
TEST_CASE("SYNCOBJ_EVENTFD forgets a known number the emulator reuses for its own file",
          "[syncobj][eventfd]") {
  Rig r;
  const int fd = r.fd.get();
  const uint32_t so = r.signalled_syncobj();
  const int num = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  REQUIRE(num >= 0);
  REQUIRE(register_eventfd(fd, so, 0, num) == 0);
  REQUIRE(syscall(SYS_close, num) == 0);
  // The lowest free number is `num` again (nothing else opens files in this test meanwhile).
  Fd other = open_render();
  REQUIRE(other.get() == num);
  CHECK(register_eventfd(fd, so, 0, num) == -EINVAL);  // a DRM file, not an eventfd
}

// The check of a known number uses the pid the emulator keeps: a fork child must compare its own
// fd table, not its parent's (where the number still names the first eventfd).
TEST_CASE("SYNCOBJ_EVENTFD in a fork child checks the child's fd table",
          "[syncobj][eventfd][fork]") {
  Rig r;
  const int fd = r.fd.get();
  const uint32_t so = r.signalled_syncobj();
  REQUIRE(register_eventfd(fd, so, 0, r.efd.get()) == 0);  // the parent's number is known
  REQUIRE(take(r.efd.get()) == 1);

  const pid_t pid = fork();
  if (pid == 0) {
    int bad = 0;
    const int other = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (other < 0 || dup2(other, r.efd.get()) != r.efd.get()) _exit(1);
    if (register_eventfd(fd, so, 0, r.efd.get()) != 0) bad |= 2;
    if (take(other) != 1) bad |= 4;  // the child's file at that number is signalled
    _exit(bad);
  }
  REQUIRE(pid > 0);
  CHECK(child_exit_code(pid) == 0);
  CHECK(take(r.efd.get()) == 0);  // and not the parent's, which the child's copy still shares
}

TEST_CASE("RVGL_EMU_NO_SYNCOBJ_EVENTFD=1 answers as a kernel without the ioctl",
          "[syncobj][eventfd][acceptance]") {
  Rig r;
  const int fd = r.fd.get();
  const uint32_t so = r.signalled_syncobj();
  {
    Knob hide("RVGL_EMU_NO_SYNCOBJ_EVENTFD", "1", "0");
    REQUIRE(hide.rc() == 0);
    // drm_ioctl(): a core number past the table is EINVAL, whatever the arguments.
    CHECK(register_eventfd(fd, so, 0, r.efd.get()) == -EINVAL);
    CHECK(register_eventfd(fd, so + 100, 0, -1) == -EINVAL);
    CHECK(take(r.efd.get()) == 0);
  }
  CHECK(register_eventfd(fd, so, 0, r.efd.get()) == 0);
  CHECK(take(r.efd.get()) == 1);
}

// drm_syncobj_eventfd_ioctl() takes a reference on the eventfd (eventfd_ctx_fdget()), not a
// descriptor: registering spends none of the caller's RLIMIT_NOFILE. Counted while the
// registrations wait (a VMM near its descriptor limit registers one per busy queue).
TEST_CASE("SYNCOBJ_EVENTFD registrations spend no descriptor", "[syncobj][eventfd]") {
  Rig r;
  const int fd = r.fd.get();
  uint32_t so = 0;
  REQUIRE(drmSyncobjCreate(fd, 0, &so) == 0);
  std::vector<Fd> efds;
  for (int i = 0; i < 20; ++i)
    efds.emplace_back(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  auto open_fds = [] {
    int n = 0;
    for (int i = 0; i < 4096; ++i)
      n += fcntl(i, F_GETFD) != -1;
    return n;
  };
  const int before = open_fds();
  for (auto &e : efds)
    REQUIRE(register_eventfd(fd, so, 0, e.get()) == 0);
  CHECK(open_fds() == before);
  REQUIRE(drmSyncobjSignal(fd, &so, 1) == 0);
  for (auto &e : efds)
    CHECK(take(e.get()) == 1);
  CHECK(open_fds() == before);
  drmSyncobjDestroy(fd, so);
}

// The registration follows the eventfd, not its number: a number replaced by dup2 while a
// registration waits leaves the registration on the eventfd it named.
TEST_CASE("SYNCOBJ_EVENTFD keeps the eventfd when its number is replaced", "[syncobj][eventfd]") {
  Rig r;
  const int fd = r.fd.get();
  for (int how = 0; how < 2; ++how) {
    INFO((how == 0 ? "dup2" : "dup3"));
    uint32_t so = 0;
    REQUIRE(drmSyncobjCreate(fd, 0, &so) == 0);
    const int num = dup(r.efd.get());  // the eventfd at a number of its own
    REQUIRE(num >= 0);
    REQUIRE(register_eventfd(fd, so, 0, num) == 0);
    Fd other{eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
    REQUIRE((how == 0 ? dup2(other.get(), num) : dup3(other.get(), num, O_CLOEXEC)) == num);
    REQUIRE(drmSyncobjSignal(fd, &so, 1) == 0);
    CHECK(take(r.efd.get()) == 1);  // the eventfd registered
    CHECK(take(other.get()) == 0);  // not what the number names now
    close(num);
    drmSyncobjDestroy(fd, so);
  }
}
