// Exhaustion at the C boundary (issue 13, point 6): a guest creating contexts until refused gets
// an error while the VMM keeps working (RVGL_MAX_CONTEXTS, and file descriptors with the limit
// lowered in a child process), and failing thread creation never lets an exception out of the
// library. This executable interposes pthread_create (the library's std::thread reaches it
// through the PLT) so a test can make thread creation fail on demand.
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../../tools/common/amd_packets.h"
#include "mini_vmm.h"
#include "renderer_fixture.h"
#include "rocm_guest.h"
#include "support/wait_for.h"
#include "log_limit.h"

using namespace rvgl::hooks_test;
namespace pk = rvgl::packets;

namespace {

std::atomic<bool> g_fail_threads{false};
std::atomic<int> g_failed_threads{0};

Renderer::Options poll_mode() {
  Renderer::Options o;
  o.flags = VIRGL_RENDERER_NO_VIRGL | VIRGL_RENDERER_THREAD_SYNC;
  return o;
}

// A NOP through the shared page: the context still serves its guest.
bool serves(RocmGuest &g) {
  rvgl_req_nop req{};
  return g.call<rvgl_rsp_nop>(RVGL_CMD_NOP, req).hdr.result == 0 && g.last_submit() == 0;
}

// Runs `call` with every thread creation failing; false when an exception left it.
template <class F>
bool with_threads_failing(F &&call) {
  g_failed_threads = 0;
  g_fail_threads = true;
  bool no_exception = true;
  try {
    call();
  } catch (...) {
    no_exception = false;
  }
  g_fail_threads = false;
  return no_exception;
}

int open_fds() {
  int n = 0;
  for (int fd = 0; fd < 4096; ++fd)
    if (fcntl(fd, F_GETFD) != -1) ++n;
  return n;
}

// Whether `n` more files open (then closed again).
bool opens(int n) {
  std::vector<int> files;
  for (int i = 0; i < n; ++i) {
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) break;
    files.push_back(fd);
  }
  for (int fd : files)
    close(fd);
  return static_cast<int>(files.size()) == n;
}

// A VMM in a child process with RLIMIT_NOFILE 96 above what it has open, serving one started
// guest: `body(guest, reserve)` returns the child's exit code, checked to be 0 (10-12: the
// setup failed).
template <class Body>
void in_child_vmm_with_few_files(Body &&body) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int limit = open_fds() + 96;
    const rlimit rl{rlim_t(limit), rlim_t(limit)};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(10);
    const int reserve = std::min(64, limit / 4);  // process_limits.cpp, fd_reserve()
    Renderer r(poll_mode());
    if (r.result() != 0) _exit(11);
    RocmGuest g(1, 100);
    try {
      g.start();
    } catch (...) {
      _exit(12);
    }
    _exit(body(g, reserve));
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

}  // namespace

extern "C" int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *),
                              void *arg) {
  using Fn = int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "pthread_create"));
  if (g_fail_threads.load()) {
    g_failed_threads.fetch_add(1);
    return EAGAIN;
  }
  return real(t, attr, fn, arg);
}

TEST_CASE("RVGL_MAX_CONTEXTS refuses more contexts; the others and the VMM go on", "[limits]") {
  ScopedEnv max("RVGL_MAX_CONTEXTS", "5");
  Renderer r(poll_mode());
  REQUIRE(r.result() == 0);
  RocmGuest first(1, 100);
  first.start();
  for (uint32_t ctx = 2; ctx <= 5; ++ctx)
    REQUIRE(virgl_renderer_context_create_with_flags(ctx, RVGL_CAPSET_ID, 0, "") == 0);
  for (int attempt = 0; attempt < 3; ++attempt)
    CHECK(virgl_renderer_context_create_with_flags(6, RVGL_CAPSET_ID, 0, "") == ENOSPC);
  CHECK(serves(first));
  virgl_renderer_context_destroy(5);
  CHECK(virgl_renderer_context_create_with_flags(6, RVGL_CAPSET_ID, 0, "") == 0);
  CHECK(virgl_renderer_context_create_with_flags(8, RVGL_CAPSET_ID, 0, "") == ENOSPC);
  for (uint32_t ctx : {2u, 3u, 4u, 6u})
    virgl_renderer_context_destroy(ctx);
  virgl_renderer_resource_unref(first.shmem_res());
  virgl_renderer_context_destroy(1);
}

TEST_CASE("a destroyed context counts against RVGL_MAX_CONTEXTS while the VMM holds its memory",
          "[limits]") {
  // Each context may fill its quota with blobs the VMM keeps after the guest destroys the
  // context; counting such a context bounds host memory by RVGL_MAX_CONTEXTS x quota.
  ScopedEnv max("RVGL_MAX_CONTEXTS", "2");
  Renderer r(poll_mode());
  REQUIRE(r.result() == 0);
  RocmGuest live(1, 100);
  live.start();
  uint32_t kept = 0;
  for (int round = 0; round < 5; ++round) {
    INFO("round " << round);
    RocmGuest gone(2, 200 + 10 * static_cast<uint32_t>(round));
    gone.start();
    const auto [bo, res] = gone.bo_blob(64 * 1024, RVGL_DOMAIN_GTT);
    (void)bo;
    kept = res;
    virgl_renderer_resource_unref(gone.shmem_res());
    virgl_renderer_context_destroy(2);
    // Context 2 is gone, but the VMM still has its blob: no room for a second context.
    CHECK(virgl_renderer_context_create_with_flags(3, RVGL_CAPSET_ID, 0, "") == ENOSPC);
    CHECK(serves(live));
    virgl_renderer_resource_unref(kept);
    REQUIRE(virgl_renderer_context_create_with_flags(3, RVGL_CAPSET_ID, 0, "") == 0);
    virgl_renderer_context_destroy(3);
  }
  virgl_renderer_resource_unref(live.shmem_res());
  virgl_renderer_context_destroy(1);
}

// Run only by the test below, in a process of its own: a fork would inherit the limit's state
// from the tests this process has run.
TEST_CASE("(child) 200 contexts refused by RVGL_MAX_CONTEXTS=1", "[.flood-child]") {
  Renderer r(poll_mode());
  REQUIRE(r.result() == 0);
  REQUIRE(virgl_renderer_context_create_with_flags(1, RVGL_CAPSET_ID, 0, "") == 0);
  const auto t0 = std::chrono::steady_clock::now();
  for (uint32_t ctx = 2; ctx < 202; ++ctx)
    REQUIRE(virgl_renderer_context_create_with_flags(ctx, RVGL_CAPSET_ID, 0, "") == ENOSPC);
  // All 200 inside one interval of the limit (each takes microseconds).
  REQUIRE(std::chrono::steady_clock::now() - t0 <
          std::chrono::nanoseconds(rvgl::hooks::LogLimit::kIntervalNs));
  virgl_renderer_context_destroy(1);
}

TEST_CASE("a guest asking again and again past RVGL_MAX_CONTEXTS does not flood the host's log",
          "[limits]") {
  // The child's stderr goes to a memfd read here; its stdout (Catch2's report) nowhere.
  const int log = memfd_create("child-stderr", MFD_CLOEXEC);
  REQUIRE(log >= 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0 || dup2(null, STDOUT_FILENO) < 0 || dup2(log, STDERR_FILENO) < 0) _exit(120);
    setenv("RVGL_MAX_CONTEXTS", "1", 1);
    execl("/proc/self/exe", "hooks_limits_test", "[.flood-child]", static_cast<char *>(nullptr));
    _exit(121);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  std::string text;
  char buf[4096];
  ssize_t n;
  for (off_t at = 0; (n = pread(log, buf, sizeof(buf), at)) > 0; at += n)
    text.append(buf, static_cast<size_t>(n));
  close(log);
  size_t refused = 0, left_out = 0;
  for (size_t at = 0; (at = text.find("refused: ", at)) != std::string::npos; ++at)
    ++refused;
  for (size_t at = 0; (at = text.find("left out", at)) != std::string::npos; ++at)
    ++left_out;
  CHECK(refused == rvgl::hooks::LogLimit::kBurst);  // 200 before the limit
  CHECK(left_out == 0);                             // said with the next interval's first line
}

TEST_CASE("with ulimit -n lowered, contexts are refused before the VMM runs out of files",
          "[limits]") {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // The child is the VMM: no Catch2 here, an exit code per failed step.
    setenv("RVGL_MAX_CONTEXTS", "1000", 1);
    const int base = open_fds();
    const rlimit rl{rlim_t(base + 96), rlim_t(base + 96)};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(10);
    const int reserve = std::min(64, (base + 96) / 4);  // process_limits.cpp, fd_reserve()
    Renderer r(poll_mode());
    if (r.result() != 0) _exit(11);
    RocmGuest first(1, 100);
    try {
      first.start();
    } catch (...) {
      _exit(12);
    }
    // Bare contexts until refused; the first one tells what a context costs in descriptors.
    const int before_second = base + 96 - open_fds();
    if (virgl_renderer_context_create_with_flags(2, RVGL_CAPSET_ID, 0, "") != 0) _exit(13);
    const int per_ctx = before_second - (base + 96 - open_fds());
    if (per_ctx <= 0) _exit(14);
    uint32_t ctx = 3;
    int ret = 0;
    for (; ctx < 1000; ++ctx)
      if ((ret = virgl_renderer_context_create_with_flags(ctx, RVGL_CAPSET_ID, 0, "")) != 0) break;
    if (ret != EMFILE) _exit(15);
    // Exactly as many as leave the reserve: context n is made while free >= reserve.
    const int created = static_cast<int>(ctx) - 2;  // contexts 2 .. ctx-1
    const int expect = (before_second - reserve) / per_ctx + 1;
    if (created != expect) _exit(16);
    // The VMM can still open files, and the first guest is still served.
    std::vector<int> files;
    for (int i = 0; i < reserve - per_ctx; ++i) {
      const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) _exit(17);
      files.push_back(fd);
    }
    for (int fd : files)
      close(fd);
    if (!serves(first)) _exit(18);
    // A context that goes makes room for one more.
    virgl_renderer_context_destroy(2);
    if (virgl_renderer_context_create_with_flags(2, RVGL_CAPSET_ID, 0, "") != 0) _exit(19);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("with ulimit -n lowered, host blobs are refused before the VMM runs out of files",
          "[limits]") {
  // Every claimed BO blob keeps a dma-buf fd for its life, as the real library's blobs do; a guest
  // claiming blobs in a loop must stop at the VMM's reserve, not at its last descriptor.
  in_child_vmm_with_few_files([](RocmGuest &g, int reserve) {
    std::vector<std::pair<uint32_t, uint32_t>> blobs;  // {bo, res}
    int refusal = 0;
    for (int i = 0; i < 4096 && !refusal; ++i) {
      const uint64_t blob_id = 1000 + static_cast<uint64_t>(i);
      const uint32_t bo = g.bo_create(4096, RVGL_DOMAIN_GTT, 0, blob_id);
      const uint32_t res = g.next_res_id();
      const int ret = g.create_blob(res, VIRGL_RENDERER_BLOB_MEM_HOST3D,
                                    RVGL_BLOB_FLAG_USE_SHAREABLE, blob_id, 4096);
      if (ret == 0)
        blobs.push_back({bo, res});
      else
        refusal = ret;
    }
    if (refusal != -EMFILE) return 13;
    if (blobs.empty()) return 14;
    if (!opens(reserve)) return 15;  // the reserve is the VMM's: every one of them opens
    if (!serves(g)) return 16;
    // A blob that goes makes room for one more. Its BO goes too: the emulated kernel keeps a
    // memfd per GTT object, a descriptor a real kernel does not spend.
    virgl_renderer_resource_unref(blobs.back().second);
    rvgl_req_bo_free f{};
    f.bo = blobs.back().first;
    if (g.call<rvgl_rsp_bo_free>(RVGL_CMD_BO_FREE, f).hdr.result != 0) return 18;
    const uint64_t again = 5000;
    g.bo_create(4096, RVGL_DOMAIN_GTT, 0, again);
    if (g.create_blob(g.next_res_id(), VIRGL_RENDERER_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_SHAREABLE,
                      again, 4096) != 0)
      return 17;
    return 0;
  });
}

TEST_CASE("with ulimit -n lowered, queues are refused before the VMM runs out of files",
          "[limits]") {
  // Each queue spends a descriptor (its completion watch; the emulated kernel one more for its
  // user fence page): the queue quota is per context, so contexts' queues together could take the
  // VMM's reserve (an audit: 8 contexts x 62 queues, +1024 descriptors).
  in_child_vmm_with_few_files([](RocmGuest &g, int reserve) {
    auto create = [&](uint32_t ring) {
      rvgl_req_queue_create q{};
      q.kind = RVGL_QUEUE_KIND_KERNEL;
      q.ip = RVGL_IP_COMPUTE;
      q.ring_idx = ring;
      return g.call<rvgl_rsp_queue_create>(RVGL_CMD_QUEUE_CREATE, q);
    };
    std::vector<uint32_t> queues;
    int32_t refusal = 0;
    for (uint32_t ring = 1; ring <= 62 && !refusal; ++ring) {
      const auto rsp = create(ring);
      if (rsp.hdr.result == 0)
        queues.push_back(rsp.queue);
      else
        refusal = rsp.hdr.result;
    }
    if (refusal != -EMFILE) return 13;
    if (queues.empty()) return 14;
    if (!opens(reserve)) return 15;  // the reserve is the VMM's: every one of them opens
    if (!serves(g)) return 16;
    // A queue that goes (no fences wait on it) makes room for one more.
    rvgl_req_queue_destroy d{};
    d.queue = queues.back();
    if (g.call<rvgl_rsp_queue_destroy>(RVGL_CMD_QUEUE_DESTROY, d).hdr.result != 0) return 17;
    return create(62).hdr.result == 0 ? 0 : 18;
  });
}

TEST_CASE("thread creation failing never lets an exception out", "[limits]") {
  Renderer r(poll_mode());
  REQUIRE(r.result() == 0);
  for (int round = 0; round < 20; ++round) {
    int ret = -1;
    if (!with_threads_failing(
            [&] { ret = virgl_renderer_context_create_with_flags(1, RVGL_CAPSET_ID, 0, ""); }))
      FAIL("an exception left virgl_renderer_context_create_with_flags");
    CHECK(ret == EAGAIN);
    CHECK(g_failed_threads.load() == 1);
    // The VMM goes on: the same id can be created once threads can be.
    RocmGuest g(1, 100);
    REQUIRE_NOTHROW(g.start());
    CHECK(serves(g));
    virgl_renderer_resource_unref(g.shmem_res());
    virgl_renderer_context_destroy(1);
  }
}

namespace {

// Two guests of one VMM contending for the SPM of XCP 0, bound to ring 3.
struct SpmContenders {
  Renderer r{poll_mode()};
  RocmGuest a{1, 100}, b{2, 200};
  rvgl_req_spm_acquire acq{};
  rvgl_req_spm_release rel{};
  SpmContenders() {
    REQUIRE(r.result() == 0);
    a.start();
    b.start();
    REQUIRE((a.caps().features & RVGL_FEATURE_SPM) != 0);
    acq.ring_idx = 3;
    // A session an earlier test's context left to the reaper may still hold the SPM: wait it
    // out, and give the SPM back at once (a release with no thread finishes in place).
    int32_t res = -EBUSY;
    REQUIRE(rvgl::test::wait_for([&] {
      return (res = a.call<rvgl_rsp_spm_acquire>(RVGL_CMD_SPM_ACQUIRE, acq).hdr.result) != -EBUSY;
    }));
    REQUIRE(res == 0);
    REQUIRE(with_threads_failing(
        [&] { REQUIRE(a.call<rvgl_rsp_spm_release>(RVGL_CMD_SPM_RELEASE, rel).hdr.result == 0); }));
  }
  ~SpmContenders() {
    virgl_renderer_resource_unref(a.shmem_res());
    virgl_renderer_resource_unref(b.shmem_res());
    virgl_renderer_context_destroy(1);
    virgl_renderer_context_destroy(2);
  }
};

}  // namespace

TEST_CASE("an SPM released while no thread can start is finished on the VMM's thread", "[limits]") {
  // A session released with a SET_DEST blocked in the kernel is finished on a reaper thread;
  // without one it is finished in place (the VMM's call waits for the kernel's return), so the
  // SPM is not held for ever by a session nobody ends. An idle session needs no thread at all.
  SpmContenders s;
  RocmGuest &a = s.a, &b = s.b;
  const rvgl_req_spm_acquire &acq = s.acq;
  const rvgl_req_spm_release &rel = s.rel;
  auto acquire = [&](RocmGuest &g) {
    return g.call<rvgl_rsp_spm_acquire>(RVGL_CMD_SPM_ACQUIRE, acq).hdr.result;
  };
  // A release on a reaper thread: the SPM is busy until that thread has finished the session.
  auto acquire_once_free = [&](RocmGuest &g) {
    int32_t res = -EBUSY;
    rvgl::test::wait_for([&] { return (res = acquire(g)) != -EBUSY; });
    return res;
  };
  // The emulated SPM fills nothing at this rate: a SET_DEST stays in the kernel to its timeout.
  REQUIRE(rvgl_emu_set_knob("RVGL_EMU_SPM_RATE_HZ", "10") == 0);
  constexpr uint64_t kDest = 64 * 1024;
  const uint32_t dest = a.bo_create(kDest, RVGL_DOMAIN_GTT, RVGL_BO_FLAG_CPU_ACCESS, 0);
  for (int round = 0; round < 5; ++round) {
    INFO("round " << round);
    REQUIRE(acquire_once_free(a) == 0);
    CHECK(acquire(b) == -EBUSY);
    // Idle: released with no thread asked for.
    int32_t released = -1;
    if (!with_threads_failing(
            [&] { released = a.call<rvgl_rsp_spm_release>(RVGL_CMD_SPM_RELEASE, rel).hdr.result; }))
      FAIL("an exception left virgl_renderer_submit_cmd");
    CHECK(released == 0);
    CHECK(g_failed_threads.load() == 0);
    REQUIRE(acquire(a) == 0);
    // Busy: a SET_DEST the worker took to the kernel, then a second in the kernel's place.
    for (int i = 0; i < 2; ++i) {
      rvgl_req_spm_set_dest sd{};
      sd.bo = dest;
      sd.size = kDest;
      sd.timeout_ms = i == 0 ? 0 : 100;
      sd.hdr = {RVGL_CMD_SPM_SET_DEST, sizeof(sd), a.next_seqno(), RVGL_RSP_NONE};
      std::vector<uint8_t> bytes(sizeof(sd));
      std::memcpy(bytes.data(), &sd, sizeof(sd));
      REQUIRE(a.submit_raw(bytes) == 0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the second is in the kernel
    released = -1;
    if (!with_threads_failing(
            [&] { released = a.call<rvgl_rsp_spm_release>(RVGL_CMD_SPM_RELEASE, rel).hdr.result; }))
      FAIL("an exception left virgl_renderer_submit_cmd");
    CHECK(released == 0);
    CHECK(g_failed_threads.load() == 1);
    // Finished already, with no thread: free for the other context at once.
    REQUIRE(acquire(b) == 0);
    REQUIRE(b.call<rvgl_rsp_spm_release>(RVGL_CMD_SPM_RELEASE, rel).hdr.result == 0);
    CHECK(serves(a));
  }
  REQUIRE(rvgl_emu_set_knob("RVGL_EMU_SPM_RATE_HZ", "1000") == 0);
  CHECK(acquire_once_free(a) == 0);
}

TEST_CASE("an SPM acquired while no thread can start is refused and stays free", "[limits]") {
  // The session's worker cannot start: the guest gets -EAGAIN for its request, the rest of its
  // buffer is still served, and the SPM (arbiter and kernel) is free for anyone at once.
  SpmContenders s;
  RocmGuest &a = s.a, &b = s.b;
  const rvgl_req_spm_acquire &acq = s.acq;
  const rvgl_req_spm_release &rel = s.rel;
  for (int round = 0; round < 5; ++round) {
    int32_t got = 0;
    if (!with_threads_failing(
            [&] { got = a.call<rvgl_rsp_spm_acquire>(RVGL_CMD_SPM_ACQUIRE, acq).hdr.result; }))
      FAIL("an exception left virgl_renderer_submit_cmd");
    CHECK(got == -EAGAIN);
    CHECK(g_failed_threads.load() == 1);
    CHECK(a.last_submit() == 0);
    CHECK(serves(a));
    // Nobody holds it: the other context takes it at once, then the first. Each release is made
    // while no thread can start, so it finishes in place (the previous test) and the next
    // acquire needs no wait.
    REQUIRE(b.call<rvgl_rsp_spm_acquire>(RVGL_CMD_SPM_ACQUIRE, acq).hdr.result == 0);
    REQUIRE(with_threads_failing(
        [&] { REQUIRE(b.call<rvgl_rsp_spm_release>(RVGL_CMD_SPM_RELEASE, rel).hdr.result == 0); }));
    REQUIRE(a.call<rvgl_rsp_spm_acquire>(RVGL_CMD_SPM_ACQUIRE, acq).hdr.result == 0);
    REQUIRE(with_threads_failing(
        [&] { REQUIRE(a.call<rvgl_rsp_spm_release>(RVGL_CMD_SPM_RELEASE, rel).hdr.result == 0); }));
  }
}

TEST_CASE("global fences without a waiter thread still retire, from the VMM's poll", "[limits]") {
  // An ASYNC_FENCE_CB VMM without context fences: held global fences are normally written by
  // the waiter thread; when it cannot start they go out from virgl_renderer_poll.
  MiniVmm vmm({"async-v1", 1,
               VIRGL_RENDERER_NO_VIRGL | VIRGL_RENDERER_ASYNC_FENCE_CB | VIRGL_RENDERER_THREAD_SYNC,
               false, false, RVGL_CAPSET_ID, nullptr, false, false, false, false});
  REQUIRE(vmm.result() == 0);
  RocmGuest g(1, 100);
  g.start();
  auto [buf_bo, buf_res] = g.bo_blob(65536, RVGL_DOMAIN_GTT);
  auto *ib = static_cast<uint32_t *>(g.map(buf_res, 65536));
  const uint64_t va = g.caps().va_start;
  REQUIRE(g.va_map(buf_bo, 0, va, 65536, RVGL_VA_FLAG_READ | RVGL_VA_FLAG_EXECUTE) == 0);
  std::vector<uint32_t> nop;
  pk::sdma_nop(nop);
  pk::sdma_pad(nop);
  std::memcpy(ib, nop.data(), nop.size() * 4);
  const uint32_t q = g.queue_create(RVGL_IP_SDMA, 1);
  REQUIRE(rvgl_emu_set_knob("RVGL_EMU_JOB_LATENCY_US", "20000") == 0);
  const uint64_t jobs0 = MiniVmm::jobs_completed();
  g.submit(q, va, nop.size());
  int ret = -1;
  if (!with_threads_failing([&] { ret = vmm.fence(0, 0, 7); }))
    FAIL("an exception left virgl_renderer_create_fence");
  REQUIRE(rvgl_emu_set_knob("RVGL_EMU_JOB_LATENCY_US", "0") == 0);
  CHECK(ret == 0);
  CHECK(g_failed_threads.load() == 1);
  REQUIRE(vmm.run_until([&] { return vmm.newest_global() == 7; }));
  const auto retired = vmm.retired();
  REQUIRE(retired.size() == 1);
  CHECK(retired[0].jobs_completed - jobs0 == 1);
  CHECK(retired[0].fence_id == 7);
  virgl_renderer_resource_unref(buf_res);
  virgl_renderer_resource_unref(g.shmem_res());
  virgl_renderer_context_destroy(1);
}
