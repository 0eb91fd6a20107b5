// A health check reads a job's error from its queue's user fence page when the job wrote it (it
// ran to its end: no error) and asks the kernel only about the others, and asks the reset probe
// for the contexts' state (queue_health.h, reset_probe.h), so a context with n busy queues whose
// jobs ran costs 2 ioctls per check, not 2n + 1; when a job failed, every queue's context is
// asked on its own, so the classification is the one the per-queue path makes; after a reset,
// each queue is asked once, whichever check first looks at it.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../tools/common/amd_packets.h"
#include "amdgpu/amdgpu_device.h"
#include "amdgpu/render_node.h"
#include "events/event_ring.h"
#include "queue/health_pacer.h"
#include "queue/kernel_queue.h"
#include "queue/queue_health.h"
#include "rvgl_emu.h"
#include "support/device_bo.h"
#include "support/device_user_queue.h"
#include "support/held_interrupts.h"
#include "support/queue_wait.h"
#include "support/scoped_knob.h"
#include "support/wait_for.h"
#include "util/monotonic_clock.h"

using namespace rvgl;
namespace pk = rvgl::packets;

namespace {

constexpr uint64_t kIbVa = 1ull << 32;
constexpr uint64_t kUnmappedVa = 3ull << 32;

std::shared_ptr<AmdgpuDevice> open_device() {
  int err = 0;
  auto dev = AmdgpuDevice::open(choose_render_node(""), &err);
  REQUIRE(dev);
  return dev;
}

// A device with a nop and a faulting IB, and a context's health owner on it (created before any
// queue, as a context's is: its reset probe vouches only for later contexts).
struct Rig {
  std::shared_ptr<AmdgpuDevice> dev = open_device();
  test::DeviceBo ibs{*dev, 4096, AMDGPU_GEM_DOMAIN_GTT, kIbVa};
  rvgl_ib nop_ib{}, fault_ib{}, fault2_ib{};
  std::vector<uint8_t> page;  // the shared page, once attach_page() gave the ring one
  EventRing events{[] {}};
  QueueHealth health{dev, events, [] {}};

  Rig() {
    std::vector<uint32_t> nop, fault;
    pk::pm4_nop(nop, 6);
    pk::pm4_write_data(fault, kUnmappedVa, {1});  // a VM fault: the job stops (vm_fault_stop=2)
    std::memcpy(ibs.cpu, nop.data(), nop.size() * 4);
    std::memcpy(ibs.ptr<uint8_t>() + 1024, fault.data(), fault.size() * 4);
    nop_ib = {kIbVa, static_cast<uint32_t>(nop.size() * 4), 0};
    fault_ib = {kIbVa + 1024, static_cast<uint32_t>(fault.size() * 4), 0};
    std::vector<uint32_t> fault2;  // another address: a new entry in the fault cache
    pk::pm4_write_data(fault2, kUnmappedVa + (1ull << 24), {1});
    std::memcpy(ibs.ptr<uint8_t>() + 2048, fault2.data(), fault2.size() * 4);
    fault2_ib = {kIbVa + 2048, static_cast<uint32_t>(fault2.size() * 4), 0};
  }
  ~Rig() { dev->gem_close(ibs.handle); }

  // Gives the event ring a shared page, so a test can read the records' queues.
  void attach_page() {
    page.resize(RVGL_SHMEM_SIZE);
    ShmemView view(page.data(), page.size());
    view.init_header();
    events.attach(view);
  }
  // The records written so far (the ring never wraps here) as "type queue", sorted: the records
  // of one check come in handle order, which a test about who gets what need not pin down.
  std::vector<std::string> records_by_queue() const {
    const auto *hdr = reinterpret_cast<const rvgl_shmem_header *>(page.data());
    std::vector<std::string> out;
    for (uint32_t i = 0; i < hdr->event_wptr; ++i) {
      rvgl_event e;
      std::memcpy(&e, page.data() + RVGL_EVENT_RING_OFFSET + i * sizeof(e), sizeof(e));
      const bool guilty = e.payload[0] & RVGL_EVENT_RESET_GUILTY;
      const char *type = e.type == RVGL_EVENT_VM_FAULT      ? "vm_fault"
                         : e.type == RVGL_EVENT_QUEUE_HANG  ? "hang"
                         : e.type != RVGL_EVENT_QUEUE_RESET ? "other"
                         : guilty                           ? "guilty_reset"
                                                            : "innocent_reset";
      out.push_back(std::string(type) + " " +
                    (e.queue == RVGL_EVENT_QUEUE_NONE ? "none" : std::to_string(e.queue)));
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  std::shared_ptr<KernelQueue> queue() {
    std::unique_ptr<KernelQueue> q;
    REQUIRE(KernelQueue::create(dev, RVGL_IP_COMPUTE, RVGL_PRIORITY_NORMAL, &q) == 0);
    return q;
  }

  std::shared_ptr<KernelQueue> queue_with_jobs(const rvgl_ib &ib, int jobs = 1) {
    std::shared_ptr<KernelQueue> q = queue();
    uint64_t seq = 0;
    for (int i = 0; i < jobs; ++i)
      REQUIRE(q->submit({&ib, 1}, {}, 0, &seq) == 0);
    // Done (signalled, with or without an error) before the check looks.
    test::wait_signalled(*q, seq);
    return q;
  }
};

// A completion as the engine reports it (QueueWatch::reached): marked, and checked at once when
// a check is due.
void complete(QueueHealth &h, uint32_t handle, const std::shared_ptr<KernelQueue> &q,
              uint64_t point, int64_t now) {
  if (h.completed(handle, *q, point, now)) h.check(now);
}

// The ioctls of whatever check `complete()` (or tick) runs now on this thread.
template <typename F>
uint64_t ioctls_of(QueueHealth &h, F &&f) {
  const uint64_t checks = h.checks();
  const uint64_t before = rvgl_emu_thread_ioctls();
  f();
  const uint64_t n = rvgl_emu_thread_ioctls() - before;
  REQUIRE(h.checks() == checks + 1);
  return n;
}

// Submits `jobs` nop jobs on `q` and waits for the kernel to signal the last; returns its seq.
uint64_t run_jobs(const Rig &r, KernelQueue &q, int jobs) {
  uint64_t seq = 0;
  for (int i = 0; i < jobs; ++i)
    REQUIRE(q.submit({&r.nop_ib, 1}, {}, 0, &seq) == 0);
  test::wait_signalled(q, seq);
  return seq;
}

// The timeout's soft recovery kills the 2nd job of every kernel context 30 ms in: its user fence
// is written, its fence signals -ENODATA, and only then is the reset counted.
struct SoftRecovery {
  test::ScopedKnob lockup{"RVGL_EMU_LOCKUP_TIMEOUT_MS", "30",
                          std::getenv("RVGL_EMU_LOCKUP_TIMEOUT_MS") ? nullptr : "2000"};
  test::ScopedKnob soft{"RVGL_EMU_SOFT_RECOVER_JOB", "2", "0"};
  SoftRecovery() {
    REQUIRE(lockup.ok());
    REQUIRE(soft.ok());
  }
};

// A queue whose one job ran to its end, added to r's health owner as `handle` and checked at
// `t`: 2 ioctls (the probe, the fault cache), and its context's state after a GPU reset the
// health owner has seen (`after_reset`: each queue's context is asked once then).
std::shared_ptr<KernelQueue> checked_queue(Rig &r, uint32_t handle, int64_t t,
                                           bool after_reset = false) {
  auto q = r.queue_with_jobs(r.nop_ib);
  r.health.add(handle, q);
  CHECK(ioctls_of(r.health, [&] { complete(r.health, handle, q, 1, t); }) == 2u + after_reset);
  return q;
}

// The device's reset counter moves now: a new kernel context of r's device loses its 2nd job to
// an innocent GPU reset.
void reset_now(Rig &r) {
  test::ScopedKnob reset("RVGL_EMU_RESET_JOB", "2", "0");
  REQUIRE(reset.ok());
  r.queue_with_jobs(r.nop_ib, 2);
}

// Queue 1's completion is checked at once, before the others have run their jobs; theirs, marked
// within the interval, wait for it, and tick() runs them as one check on this thread. Returns
// that check's ioctls.
uint64_t deferred_check_ioctls(Rig &r, std::vector<std::shared_ptr<KernelQueue>> &qs,
                               const std::vector<bool> &faults) {
  QueueHealth &h = r.health;
  const int64_t t0 = monotonic_ns();
  qs.push_back(r.queue_with_jobs(r.nop_ib));
  h.add(1, qs.back());
  complete(h, 1, qs.back(), 1, t0);
  REQUIRE(h.checks() == 1);
  for (uint32_t i = 0; i < faults.size(); ++i) {
    qs.push_back(r.queue_with_jobs(faults[i] ? r.fault_ib : r.nop_ib));
    h.add(i + 2, qs.back());
    complete(h, i + 2, qs.back(), 1, t0);
  }
  REQUIRE(h.checks() == 1);
  return ioctls_of(h, [&] { h.tick(t0 + 1'000'000'000); });
}

// Queues 1 (`a`, at `seq_a`) and 2 (`b`, at `seq_b`) both completed now: one check of both.
void check_together(QueueHealth &h, const std::shared_ptr<KernelQueue> &a, uint64_t seq_a,
                    const std::shared_ptr<KernelQueue> &b, uint64_t seq_b) {
  h.add(1, a);
  h.add(2, b);
  const int64_t t = monotonic_ns();
  h.completed(1, *a, seq_a, t);
  h.completed(2, *b, seq_b, t);
  const uint64_t checks = h.checks();
  h.check(t);
  REQUIRE(h.checks() == checks + 1);
}

// One check of two queues. Queue 1's job 2 hung and the timeout's soft recovery killed it
// (-ENODATA). Queue 2, made once that recovery has counted its reset (so its context does not
// show it), ran a job that faults, as `vm_fault_stop` says. Returns queue 1 and queue 2.
std::pair<std::shared_ptr<KernelQueue>, std::shared_ptr<KernelQueue>> soft_recovered_and_faulted(
    Rig &r, const char *vm_fault_stop) {
  SoftRecovery soft;
  test::ScopedKnob mode{"RVGL_EMU_VM_FAULT_STOP", vm_fault_stop};
  REQUIRE(mode.ok());
  auto a = r.queue();
  const uint64_t seq_a = run_jobs(r, *a, 2);
  REQUIRE(test::wait_for([&] {
    uint64_t flags = 0;
    return a->ctx_flags(&flags) == 0 && (flags & AMDGPU_CTX_QUERY2_FLAGS_RESET);
  }));
  auto b = r.queue_with_jobs(r.fault_ib);
  check_together(r.health, a, seq_a, b, 1);
  return {a, b};
}

// Queue 1 of r's health owner, whose one job faults and has written its user fence while the
// caller holds the kernel's interrupt (HeldInterrupts) with vm_fault_stop=0: the fault is not
// recorded, nor the job's fence signalled, until the interrupt goes. *seq: the job.
std::shared_ptr<KernelQueue> faulted_behind_held_interrupt(Rig &r, uint64_t *seq) {
  auto a = r.queue();
  r.health.add(1, a);
  REQUIRE(a->submit({&r.fault_ib, 1}, {}, 0, seq) == 0);
  REQUIRE(test::wait_for([&] { return a->finished(*seq); }, 10000));
  return a;
}

// Runs a batch on `u` that faults (vm_fault_stop=0: the access is dropped) and waits until the
// emulated kernel has recorded the fault.
void fault_user_queue(test::DeviceUserQueue &u) {
  rvgl_emu_counters c{};
  rvgl_emu_get_counters(&c, sizeof(c));
  const uint64_t faults_before = c.vm_faults;
  std::vector<uint32_t> fault;
  pk::pm4_write_data(fault, kUnmappedVa, {1});
  u.run(fault);
  REQUIRE(test::wait_for([&] {
    rvgl_emu_get_counters(&c, sizeof(c));
    return c.vm_faults == faults_before + 1;
  }));
}

// What QUEUE_STATE reports for a queue the check found lost.
void check_lost(const KernelQueue &q, uint32_t flags, int error) {
  const KernelQueue::Status st = q.status();
  CHECK(st.lost);
  CHECK(st.flags == flags);
  CHECK(st.error == error);
}

// Holds the next reader of the emulated kernel's vm_fault_stop parameter (a check reads it when it
// has taken a fault and a job failed) inside its open(), until the test lets it go: the file is a
// FIFO meanwhile. The regular file is back when this goes. The fake tree is changed by system
// calls of our own: the emulator refuses writes into it through the calls it interposes.
class HeldFaultModeRead {
 public:
  HeldFaultModeRead() {
    glob_t g{};
    const std::string pattern = std::string(rvgl_emu_state_dir()) + "/tree-" +
                                std::to_string(getpid()) + "-*/sys/module/amdgpu/parameters";
    REQUIRE(glob(pattern.c_str(), 0, nullptr, &g) == 0);
    REQUIRE(g.gl_pathc == 1);
    dir_ = g.gl_pathv[0];
    globfree(&g);
    char buf[16] = {};
    const int fd = sys_open(path(), O_RDONLY);
    REQUIRE(fd >= 0);
    const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    REQUIRE(n > 0);
    text_.assign(buf, static_cast<size_t>(n));
    REQUIRE(syscall(SYS_unlinkat, AT_FDCWD, path().c_str(), 0) == 0);
    REQUIRE(syscall(SYS_mknodat, AT_FDCWD, path().c_str(), S_IFIFO | 0644, 0) == 0);
  }
  ~HeldFaultModeRead() {
    if (writer_ >= 0) release();
    // Written aside and renamed over the FIFO, as the emulator writes it.
    const std::string aside = dir_ + "/.vm_fault_stop.test";
    const int fd = sys_open(aside, O_WRONLY | O_CREAT | O_TRUNC);
    if (fd < 0) return;
    [[maybe_unused]] ssize_t n = ::write(fd, text_.data(), text_.size());
    ::close(fd);
    syscall(SYS_renameat, AT_FDCWD, aside.c_str(), AT_FDCWD, path().c_str());
  }
  HeldFaultModeRead(const HeldFaultModeRead &) = delete;
  HeldFaultModeRead &operator=(const HeldFaultModeRead &) = delete;

  // Returns once a reader has opened the file, or false after 5 s without one (then release()
  // still lets a later reader through).
  bool wait_for_reader() {
    for (int i = 0; i < 5000; ++i) {
      writer_ = sys_open(path(), O_WRONLY | O_NONBLOCK);  // ENXIO while no reader has it open
      if (writer_ >= 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    writer_ = sys_open(path(), O_RDWR);  // never blocks on a FIFO
    return false;
  }
  // The reader gets the parameter's text and goes on.
  void release() {
    [[maybe_unused]] ssize_t n = ::write(writer_, text_.data(), text_.size());
    ::close(writer_);
    writer_ = -1;
  }

 private:
  static int sys_open(const std::string &p, int flags) {
    return static_cast<int>(syscall(SYS_openat, AT_FDCWD, p.c_str(), flags | O_CLOEXEC, 0644));
  }
  std::string path() const { return dir_ + "/vm_fault_stop"; }
  std::string dir_, text_;
  int writer_ = -1;
};

}  // namespace

TEST_CASE("a health check reads the job errors of queues whose jobs ran from their user fences",
          "[health]") {
  Rig r;
  std::vector<std::shared_ptr<KernelQueue>> qs;
  // The deferred check sees queues 2-5, whose jobs wrote their user fences: no job error to ask;
  // the reset probe for their contexts, the fault cache.
  CHECK(deferred_check_ioctls(r, qs, {false, false, false, false}) == 1 + 1);
  for (const auto &q : qs)
    CHECK_FALSE(q->status().lost);
  CHECK(r.events.dropped_unattached() == 0);
}

TEST_CASE("a health check asks each queue's context alone when one job failed", "[health]") {
  Rig r;
  std::vector<std::shared_ptr<KernelQueue>> qs;
  // The failed job never wrote its user fence: a WAIT_CS for it alone, and one for its context's
  // own error (Linux 6.5+ answers that for every job: KernelQueue::context_error()); the reset
  // probe, which finds the GPU reset that ended the failed job (the kernel's timeout handler,
  // emu/README.md): a WAIT_CS for each other queue's job, which a reset makes the kernel's to
  // answer whatever its user fence says (verify_jobs); a failure, so a context query for each of
  // the four, then the fault cache, which names the queue whose job failed (no hang: no search
  // for it). Queues 2 and 3, whose contexts predate the reset, were reset, innocent; queue 5's
  // context was made after it.
  CHECK(deferred_check_ioctls(r, qs, {false, false, true, false}) == 2 + 1 + 3 + 4 + 1);
  for (size_t i = 0; i < qs.size(); ++i)
    CHECK(qs[i]->status().lost == (i == 3));
  CHECK(qs[3]->status().flags == (RVGL_QUEUE_FLAG_GUILTY | RVGL_QUEUE_FLAG_VM_FAULT));
  CHECK(qs[1]->status().flags == RVGL_QUEUE_FLAG_INNOCENT);
  CHECK(qs[2]->status().flags == RVGL_QUEUE_FLAG_INNOCENT);
  CHECK(qs[4]->status().flags == 0);
}

TEST_CASE("after a GPU reset each queue's context is asked once, by whichever check sees it",
          "[health]") {
  Rig r;
  QueueHealth &health = r.health;
  auto a = r.queue_with_jobs(r.nop_ib);
  auto b = r.queue_with_jobs(r.nop_ib);
  health.add(1, a);
  health.add(2, b);
  int64_t t = monotonic_ns();
  // Before the reset: the probe, the fault cache; no context query, and no WAIT_CS (the job
  // wrote its user fence).
  CHECK(ioctls_of(health, [&] { complete(health, 1, a, 1, t); }) == 2);

  // Another context's second job is taken by a reset (innocent, no VRAM lost): the device's
  // reset counter moves, and a and b, created before it, see RESET in their contexts.
  reset_now(r);

  // The first check after it sees only a: the probe reports the reset, so a's context is asked,
  // and a's job is asked of the kernel whatever its user fence says (a job the timeout's soft
  // recovery killed writes it too): one WAIT_CS.
  t += 1'000'000'000;
  CHECK(ioctls_of(health, [&] { complete(health, 1, a, 1, t); }) == 4);
  CHECK(a->status().flags == RVGL_QUEUE_FLAG_INNOCENT);
  CHECK(b->status().flags == 0);
  // b's first check after it: the probe has nothing new, but b's context was last read before
  // the answer that reported the reset, so it is asked too, and b's job as a's was.
  t += 1'000'000'000;
  CHECK(ioctls_of(health, [&] { complete(health, 2, b, 1, t); }) == 4);
  CHECK(b->status().flags == RVGL_QUEUE_FLAG_INNOCENT);
  // Both read and their jobs asked since: the probe speaks for them again.
  t += 1'000'000'000;
  CHECK(ioctls_of(health, [&] { complete(health, 1, a, 1, t); }) == 2);
  CHECK_FALSE(a->status().lost);
  CHECK_FALSE(b->status().lost);
  // One innocent reset record each, and nothing else (no shared page: counted as dropped).
  CHECK(r.events.dropped_unattached() == 2);

  // A refusal is the kernel speaking of that queue's context: it is asked whatever the probe says.
  health.refused(2);
  t += 1'000'000'000;
  CHECK(ioctls_of(health, [&] { health.tick(t); }) == 3);
}

TEST_CASE("a reset one context's check hears of first is looked at by the others, told once",
          "[health]") {
  // Two contexts' health owners; quiet's queue does no more work after its first job.
  Rig quiet, busy;
  auto q = busy.queue_with_jobs(busy.nop_ib);
  busy.health.add(1, q);
  int64_t t = monotonic_ns();
  auto idle = checked_queue(quiet, 1, t);
  CHECK(quiet.health.deadline_ns() == t + QueueHealth::kQuietLookNs);
  reset_now(busy);
  // busy's probe reports the reset (its context asked, its job asked) and busy tells quiet,
  // which has nothing of its own to be checked after: its idle queue is due now.
  t += 1'000'000'000;
  CHECK(ioctls_of(busy.health, [&] { complete(busy.health, 1, q, 1, t); }) == 4);
  CHECK(quiet.health.deadline_ns() != 0);
  // quiet's check: its own probe (the reset), its context, its job asked, the fault cache.
  t += 1'000'000'000;
  CHECK(ioctls_of(quiet.health, [&] { quiet.health.tick(t); }) == 4);
  CHECK(idle->status().flags == RVGL_QUEUE_FLAG_INNOCENT);
  CHECK(quiet.events.dropped_unattached() == 1);
  // quiet was told: it tells no one again.
  CHECK(busy.health.deadline_ns() == 0);
}

TEST_CASE("a hang classified before its recovery counted the reset has the probe asked again",
          "[health]") {
  // Soft recovery and a ring reset move the device's reset counter only after the hung job's
  // fence signalled: a check in between classifies the hang and its probe sees no reset yet. Here
  // the hung queue's reset is counted a second after its job's fence signalled, long after the
  // looks below, and another context's reset comes when the test says.
  test::ScopedKnob lockup{"RVGL_EMU_LOCKUP_TIMEOUT_MS", "30",
                          std::getenv("RVGL_EMU_LOCKUP_TIMEOUT_MS") ? nullptr : "2000"};
  test::ScopedKnob late{"RVGL_EMU_RECOVERY_COUNT_DELAY_US", "1000000", "0"};
  REQUIRE((lockup.ok() && late.ok()));
  Rig r;
  QueueHealth &health = r.health;
  int64_t t = monotonic_ns();
  auto idle = checked_queue(r, 1, t);
  rvgl_emu_counters c0{};
  rvgl_emu_get_counters(&c0, sizeof(c0));
  std::shared_ptr<KernelQueue> hung;
  {
    test::ScopedKnob ring{"RVGL_EMU_RING_RESET_JOB", "2", "0"};  // the 2nd job: only its ring
    REQUIRE(ring.ok());                                          // reset ends it
    hung = r.queue_with_jobs(r.nop_ib, 2);
  }
  health.add(2, hung);
  t += 1'000'000'000;
  complete(health, 2, hung, 2, t);
  REQUIRE(hung->status().flags == RVGL_QUEUE_FLAG_HANG);
  // The ring reset's count, due a second after the fence, lands before the next test case.
  struct AwaitCount {
    uint64_t expected;  // the device's count once it has landed, with the test's own resets
    ~AwaitCount() {
      test::wait_for(
          [&] {
            rvgl_emu_counters c{};
            rvgl_emu_get_counters(&c, sizeof(c));
            return c.gpu_resets >= expected;
          },
          5000);
    }
  } await_count{c0.gpu_resets + 1};
  const int64_t interval = HealthPacer::process().interval_ns(t);
  CHECK(health.deadline_ns() == t + interval);

  SECTION("the reset comes: the probe alone finds it, then the idle queue hears of it") {
    reset_now(r);
    ++await_count.expected;
    t += interval;
    CHECK(ioctls_of(health, [&] { health.tick(t); }) == 1);
    // The idle queue is marked: its check asks its context and its job (after a reset).
    t += interval;
    CHECK(ioctls_of(health, [&] { health.tick(t); }) == 4);
    CHECK(idle->status().flags == RVGL_QUEUE_FLAG_INNOCENT);
    CHECK(health.deadline_ns() == t + QueueHealth::kQuietLookNs);  // its probe saw no new reset
    CHECK(r.events.dropped_unattached() == 2);                     // the hang, the innocent reset
  }
  SECTION("no reset comes: the probe is asked 10 times, 1, 2, 4 ... intervals apart") {
    for (int look = 0; look < 10; ++look) {
      INFO("look " << look);
      CHECK(health.deadline_ns() == t + (interval << look));
      t = health.deadline_ns();
      CHECK(ioctls_of(health, [&] { health.tick(t); }) == 1);
    }
    CHECK(health.deadline_ns() == 0);
    CHECK_FALSE(idle->status().lost);
    CHECK(idle->status().flags == 0);
  }
}

TEST_CASE("a check that trusted its completions has the probe asked once more, when all is quiet",
          "[health]") {
  // The mainline kernel counts a soft recovery only after the killed job's fence signalled, and
  // that job wrote its user fence: a check between the two trusts the job and its probe sees no
  // reset. If nothing completes after it, the quiet look is the only later check. Here a nop
  // job plays the trusted one and another context's reset comes when the test says.
  Rig r;
  QueueHealth &health = r.health;
  int64_t t = monotonic_ns();
  auto q = checked_queue(r, 1, t);
  CHECK(health.deadline_ns() == t + QueueHealth::kQuietLookNs);
  const int64_t interval = HealthPacer::process().interval_ns(t);

  SECTION("nothing comes: the probe alone, once") {
    t = health.deadline_ns();
    CHECK(ioctls_of(health, [&] { health.tick(t); }) == 1);
    CHECK(health.deadline_ns() == 0);
    CHECK(q->status().flags == 0);
    CHECK(r.events.dropped_unattached() == 0);
    // A look at the probe alone is not paced as a check of queues: a completion right after it
    // is checked at once.
    uint64_t seq = 0;
    REQUIRE(q->submit({&r.nop_ib, 1}, {}, 0, &seq) == 0);
    test::wait_signalled(*q, seq);
    CHECK(ioctls_of(health, [&] { complete(health, 1, q, seq, t + 1); }) == 2);
  }
  SECTION("work that goes on completing files it again, later") {
    uint64_t seq = 0;
    REQUIRE(q->submit({&r.nop_ib, 1}, {}, 0, &seq) == 0);
    test::wait_signalled(*q, seq);
    t += QueueHealth::kQuietLookNs / 2;
    CHECK(ioctls_of(health, [&] { complete(health, 1, q, seq, t); }) == 2);
    CHECK(health.deadline_ns() == t + QueueHealth::kQuietLookNs);
  }
  SECTION("the reset comes after the check: the quiet look finds it, then the queue hears of it") {
    reset_now(r);
    t = health.deadline_ns();
    CHECK(ioctls_of(health, [&] { health.tick(t); }) == 1);
    // The queue is marked and due at once (a probe-only look does not count for the pacing): its
    // check asks its context and its job (after a reset).
    CHECK(health.deadline_ns() <= t);
    t += interval;
    CHECK(ioctls_of(health, [&] { health.tick(t); }) == 4);
    CHECK(q->status().flags == RVGL_QUEUE_FLAG_INNOCENT);
    CHECK(r.events.dropped_unattached() == 1);
  }
}

TEST_CASE("a look due within the pacing interval is filed for the interval's end", "[health]") {
  // A check that trusts nothing (here: only a lost queue's completion) keeps the quiet look where
  // it was. When that look comes due before the interval since the check has passed, it is
  // deferred to the interval's end, and the deadline says so. It stayed at the look's own time,
  // past once its tick had run: an engine waits on its safety net for a deadline it has served
  // (found by an audit).
  Rig r;
  QueueHealth &health = r.health;
  std::shared_ptr<KernelQueue> lost;
  {
    test::ScopedKnob stop{"RVGL_EMU_VM_FAULT_STOP", "2"};  // the job fails: the queue is lost
    REQUIRE(stop.ok());
    lost = r.queue_with_jobs(r.fault_ib);
  }
  health.add(1, lost);
  int64_t t = monotonic_ns();
  complete(health, 1, lost, 1, t);
  REQUIRE(lost->status().lost);
  t += 1'000'000'000;
  // Trusted: the quiet look kQuietLookNs after it. The lost queue's job ended in a GPU reset.
  checked_queue(r, 2, t, /*after_reset=*/true);
  const int64_t look = t + QueueHealth::kQuietLookNs;
  REQUIRE(health.deadline_ns() == look);
  const int64_t interval = HealthPacer::process().interval_ns(look);
  const int64_t untrusted = look - interval / 2;
  const uint64_t checks = health.checks();
  complete(health, 1, lost, 1, untrusted);
  REQUIRE(health.checks() == checks + 1);
  REQUIRE(health.deadline_ns() == look);  // the check trusted nothing: the look stays
  health.tick(look);
  CHECK(health.checks() == checks + 1);  // deferred
  CHECK(health.deadline_ns() == untrusted + interval);
  health.tick(untrusted + interval);
  CHECK(health.checks() == checks + 2);  // the look
}

TEST_CASE(
    "a job the soft recovery killed, reached after its reset was seen, is a hang, not innocent",
    "[health]") {
  // The timeout's soft recovery writes the killed job's user fence, signals its fence with
  // -ENODATA and only then counts the reset. The health owner may learn of the queue's progress
  // later than that: told here of job 1 only while job 2 is already killed and counted, its look
  // reached a clean job 1, the probe reports the reset and the queue's context shows it. That
  // reset is job 2's own: an innocent reset record for the queue (and then its hang) was wrong.
  Rig r;
  QueueHealth &h = r.health;
  SoftRecovery soft;
  auto a = r.queue();
  h.add(1, a);
  run_jobs(r, *a, 2);  // job 2's waves hang; soft recovery ends it
  REQUIRE(test::wait_for([&] {
    uint64_t flags = 0;
    return a->ctx_flags(&flags) == 0 && (flags & AMDGPU_CTX_QUERY2_FLAGS_RESET);
  }));
  int64_t t = monotonic_ns();
  complete(h, 1, a, 1, t);
  CHECK(a->status().flags == 0);
  CHECK_FALSE(a->status().lost);
  CHECK(r.events.dropped_unattached() == 0);
  t += 1'000'000'000;
  complete(h, 1, a, 2, t);
  CHECK(a->status().flags == RVGL_QUEUE_FLAG_HANG);
  CHECK(a->status().error == -ENODATA);
  CHECK(r.events.dropped_unattached() == 1);  // the hang alone
}

TEST_CASE("an innocent queue whose look is behind the reset hears of it once it catches up",
          "[health]") {
  // Another context's reset, seen while the look at this queue had reached job 1 of its 2: the
  // reset may yet prove to be job 2's own, so the queue is not found innocent then; the look that
  // reaches job 2 finds it clean, reads the context again, and posts the innocent reset, once.
  Rig r;
  QueueHealth &h = r.health;
  auto b = r.queue_with_jobs(r.nop_ib, 2);
  h.add(1, b);
  reset_now(r);
  int64_t t = monotonic_ns();
  complete(h, 1, b, 1, t);
  CHECK(b->status().flags == 0);
  CHECK(r.events.dropped_unattached() == 0);
  t += 1'000'000'000;
  complete(h, 1, b, 2, t);
  CHECK(b->status().flags == RVGL_QUEUE_FLAG_INNOCENT);
  CHECK_FALSE(b->status().lost);
  CHECK(r.events.dropped_unattached() == 1);
  t += 1'000'000'000;
  complete(h, 1, b, 2, t);
  CHECK(r.events.dropped_unattached() == 1);
}

TEST_CASE("a reset counted between the probe and the context reads is verified, not innocent",
          "[health]") {
  // The soft recovery's count lands inside one check: after its probe answered "no reset" and
  // before it read the contexts (RVGL_EMU_RECOVERY_COUNT_AT_QUERY puts it right after the probe's
  // query). Job 2 was killed and wrote its user fence, so no job was asked of the kernel; the
  // queue's context is read anyway (a refusal of its work, here), and it shows the reset.
  // Classified from that, the queue was an innocent reset; the probe is asked again instead,
  // reports the reset, and the queue's jobs are verified: a hang.
  Rig r;
  QueueHealth &h = r.health;
  SoftRecovery soft;
  test::ScopedKnob at_query{"RVGL_EMU_RECOVERY_COUNT_AT_QUERY", "1", "0"};
  REQUIRE(at_query.ok());
  auto a = r.queue();
  h.add(1, a);
  const uint64_t seq = run_jobs(r, *a, 2);  // job 2 killed by soft recovery
  uint64_t flags = 0;
  REQUIRE(a->ctx_flags(&flags) == 0);
  REQUIRE_FALSE(flags & AMDGPU_CTX_QUERY2_FLAGS_RESET);  // not counted before the check
  const int64_t t = monotonic_ns();
  h.completed(1, *a, seq, t);
  h.refused(1);
  const uint64_t checks = h.checks();
  h.check(t);
  REQUIRE(h.checks() == checks + 1);
  CHECK(a->status().lost);
  CHECK(a->status().flags == RVGL_QUEUE_FLAG_HANG);
  CHECK(a->status().error == -ENODATA);
  CHECK(r.events.dropped_unattached() == 1);  // the hang alone
}

TEST_CASE("a reached point whose job's fence is not recorded yet is looked at again", "[health]") {
  // The engine can see a point reached while the VMM's thread is still returning from the CS
  // ioctl, before submit() recorded the job's fence. Its error cannot be read then, and an older
  // job's says nothing of it: with the context asked instead, a job that failed there (a VM
  // fault, in 1 of ~10 runs of test_events.cpp's VM fault case) made the queue lost with its
  // context GUILTY but `error` -ECANCELED, not its job's. Here point 2 has no recorded job and
  // the user fence shows only job 1: the look classifies nothing (the probe and the context are
  // asked, the fault cache is left) and the queue is looked at again; once job 2 is recorded
  // (it faulted), the next look classifies the queue from its own error.
  test::ScopedKnob stop("RVGL_EMU_VM_FAULT_STOP", "2");
  REQUIRE(stop.ok());
  Rig r;
  QueueHealth &health = r.health;
  int64_t t = monotonic_ns();
  auto q = checked_queue(r, 1, t);
  t += 1'000'000'000;
  CHECK(ioctls_of(health, [&] { complete(health, 1, q, 2, t); }) == 2);
  CHECK_FALSE(q->status().lost);
  const int64_t again = health.deadline_ns();
  CHECK(again > t);
  CHECK(again < t + QueueHealth::kQuietLookNs);  // the next interval, not the quiet look
  uint64_t seq = 0;
  REQUIRE(q->submit({&r.fault_ib, 1}, {}, 0, &seq) == 0);
  REQUIRE(seq == 2);
  test::wait_signalled(*q, 2);
  ioctls_of(health, [&] { health.tick(again); });
  const auto st = q->status();
  CHECK(st.lost);
  CHECK(st.flags == (RVGL_QUEUE_FLAG_GUILTY | RVGL_QUEUE_FLAG_VM_FAULT));
  CHECK(st.error == -ETIME);
  CHECK(r.events.dropped_unattached() == 2);  // VM_FAULT and the guilty QUEUE_RESET
}

TEST_CASE("a queue that never submitted is classified when a reset marks it", "[health]") {
  // Point 0 has no job to wait for (unlike a point past every recorded job, above): an idle
  // queue the probe's reset marks is read at once, and so are the others of its look.
  Rig r;
  QueueHealth &health = r.health;
  int64_t t = monotonic_ns();
  auto q = checked_queue(r, 1, t);  // files a quiet look
  auto idle = r.queue();
  health.add(2, idle);
  reset_now(r);
  t = health.deadline_ns();
  CHECK(ioctls_of(health, [&] { health.tick(t); }) == 1);  // the probe hears of it: both marked
  t += 1'000'000'000;
  ioctls_of(health, [&] { health.tick(t); });
  for (const auto &queue : {q, idle}) {
    CHECK_FALSE(queue->status().lost);
    CHECK(queue->status().flags == RVGL_QUEUE_FLAG_INNOCENT);
  }
  CHECK(r.events.dropped_unattached() == 2);
}

TEST_CASE("a check waiting for a kernel signal runs before another queue's completion joins it",
          "[health]") {
  // Queue a's job faults without failing (vm_fault_stop=0) and writes its user fence; the kernel
  // records the fault and signals it only when the test lets the interrupt go. Made known from the
  // user fence within b's check interval, a's check waits for that signal (postponed). b then
  // completes again: a's check runs first, alone, and b's after it. b's job ran after the fault
  // was recorded and before a's look read it, so as far as the fault cache tells, it may have
  // made the fault: posted once, for no queue, and neither queue flagged (before the drop-mode
  // rule asked about other queues' work, it went to a).
  Rig r;
  QueueHealth &h = r.health;
  auto b = r.queue_with_jobs(r.nop_ib);
  h.add(2, b);
  test::ScopedKnob mode{"RVGL_EMU_VM_FAULT_STOP", "0"};
  test::HeldInterrupts irq;
  REQUIRE(mode.ok());
  REQUIRE(irq.ok());
  rvgl_emu_counters c{};
  rvgl_emu_get_counters(&c, sizeof(c));
  const uint64_t faults_before = c.vm_faults;
  uint64_t seq_a = 0;
  auto a = faulted_behind_held_interrupt(r, &seq_a);

  const int64_t t0 = monotonic_ns();
  complete(h, 2, b, 1, t0);  // b's check: a look one interval ago
  REQUIRE(h.completed_later(1, *a, seq_a, t0 + 1, {.ran_to_end = true}));
  const uint64_t checks = h.checks();
  h.tick(t0 + 1'000'000'000);  // a's check: the kernel has not signalled a's point
  REQUIRE(h.checks() == checks + 1);
  rvgl_emu_get_counters(&c, sizeof(c));
  REQUIRE(c.vm_faults == faults_before);  // all of the above inside the gap
  CHECK_FALSE(a->status().flags & RVGL_QUEUE_FLAG_VM_FAULT);

  REQUIRE(irq.release());           // the interrupt goes
  test::wait_signalled(*a, seq_a);  // the fault is recorded now
  uint64_t seq_b = 0;
  REQUIRE(b->submit({&r.nop_ib, 1}, {}, 0, &seq_b) == 0);
  test::wait_signalled(*b, seq_b);
  const uint32_t before = r.events.dropped_unattached();
  // a's check first, then b's completion marked: within the interval, its check is deferred.
  complete(h, 2, b, seq_b, t0 + 1'000'000'001);
  CHECK(h.checks() == checks + 2);
  CHECK(r.events.dropped_unattached() - before == 1);  // the VM_FAULT, for no queue
  h.tick(t0 + 2'000'000'000);                          // b's check: nothing more
  CHECK(h.checks() == checks + 3);
  CHECK(r.events.dropped_unattached() - before == 1);
  CHECK(a->status().flags == 0);
  CHECK_FALSE(a->status().lost);
  CHECK(b->status().flags == 0);
  CHECK(h.settled());
}

TEST_CASE("a completion while a check still waits for a kernel signal does not join it",
          "[health]") {
  // As above, but b completes again while a's point is still not signalled: the waiting check,
  // run first, is postponed once more. b is held until a's check has run, and looked at after
  // it. b's completion was not looked at when a's look read the fault, so as far as the fault
  // cache tells, b's job may have made it: posted once, for no queue, at a's look.
  Rig r;
  QueueHealth &h = r.health;
  auto b = r.queue();
  const uint64_t b_last = run_jobs(r, *b, 2);
  h.add(2, b);
  test::ScopedKnob mode{"RVGL_EMU_VM_FAULT_STOP", "0"};
  test::HeldInterrupts irq;
  REQUIRE(mode.ok());
  REQUIRE(irq.ok());
  uint64_t seq_a = 0;
  auto a = faulted_behind_held_interrupt(r, &seq_a);

  const int64_t t0 = monotonic_ns();
  complete(h, 2, b, b_last - 1, t0);
  REQUIRE(h.completed_later(1, *a, seq_a, t0 + 1, {.ran_to_end = true}));
  h.tick(t0 + 1'000'000'000);  // a's check: postponed, the kernel has not signalled a's point
  const uint64_t checks = h.checks();
  complete(h, 2, b, b_last, t0 + 1'000'000'001);  // a's check again first: postponed again
  REQUIRE(h.checks() == checks + 1);
  CHECK_FALSE(h.settled());  // b's completion is not forgotten

  REQUIRE(irq.release());
  test::wait_signalled(*a, seq_a);
  const uint32_t before = r.events.dropped_unattached();
  h.tick(t0 + 2'000'000'000);  // a's check, alone
  CHECK(h.checks() == checks + 2);
  CHECK(r.events.dropped_unattached() - before == 1);  // the VM_FAULT, for no queue
  CHECK(a->status().flags == 0);
  CHECK_FALSE(a->status().lost);
  CHECK(h.deadline_ns() != 0);  // b's check, filed once a's had run
  h.tick(t0 + 3'000'000'000);
  CHECK(r.events.dropped_unattached() - before == 1);
  CHECK(b->status().flags == 0);
  CHECK(h.settled());
}

TEST_CASE("a reset notice whose queues went before their check does not silence the next reset",
          "[health]") {
  // quiet is told of a reset, and its queue is destroyed before the check the notice filed.
  // Until its probe is asked, quiet takes any reset the probe reports for the one it was told
  // of; a later reset quiet hears of first must still be told to busy. quiet's clock runs far
  // ahead, so that its quiet look (kQuietLookNs after its first check) does not ask the probe
  // before the check the notice filed.
  Rig quiet, busy;
  auto q = busy.queue_with_jobs(busy.nop_ib);
  busy.health.add(1, q);
  int64_t t = monotonic_ns() + 100'000'000'000;
  checked_queue(quiet, 1, t);
  reset_now(busy);
  complete(busy.health, 1, q, 1, monotonic_ns() + 1'000'000'000);  // busy tells quiet
  REQUIRE(busy.health.deadline_ns() == 0);
  const int64_t due = quiet.health.deadline_ns();
  REQUIRE(due != 0);
  REQUIRE(due < t + QueueHealth::kQuietLookNs);
  quiet.health.remove(1);
  quiet.health.tick(due);  // no queue to look at: the probe is asked all the same
  CHECK(quiet.health.deadline_ns() == 0);

  auto fresh = quiet.queue_with_jobs(quiet.nop_ib);
  quiet.health.add(2, fresh);
  reset_now(busy);  // a second reset, which busy has not looked for
  t += 1'000'000'000;
  complete(quiet.health, 2, fresh, 1, t);
  CHECK(fresh->status().flags == RVGL_QUEUE_FLAG_INNOCENT);
  CHECK(busy.health.deadline_ns() != 0);  // told
}

TEST_CASE("a fault no queue can own is posted once, for no queue", "[health]") {
  // With vm_fault_stop=0 (the kernel's default) a faulting job completes; when two queues
  // completed work since the last look, nobody can tell whose access it was. One VM_FAULT for
  // no queue, not one from the kernel queues' look and another from the user queues' (there are
  // none). Found by an audit: two records.
  test::ScopedKnob mode{"RVGL_EMU_VM_FAULT_STOP", "0"};
  REQUIRE(mode.ok());
  Rig r;
  QueueHealth &h = r.health;
  auto c = r.queue_with_jobs(r.nop_ib);
  h.add(3, c);
  const int64_t t0 = monotonic_ns();
  complete(h, 3, c, 1, t0);  // a look now: the next two completions wait for one check
  REQUIRE(h.checks() == 1);
  const uint32_t before = r.events.dropped_unattached();
  auto a = r.queue_with_jobs(r.fault_ib);
  auto b = r.queue_with_jobs(r.nop_ib);
  h.add(1, a);
  h.add(2, b);
  REQUIRE_FALSE(h.completed(1, *a, 1, t0 + 1));
  REQUIRE_FALSE(h.completed(2, *b, 1, t0 + 2));
  h.tick(t0 + 1'000'000'000);
  REQUIRE(h.checks() == 2);
  CHECK(r.events.dropped_unattached() - before == 1);
  CHECK(a->status().flags == 0);
  CHECK(b->status().flags == 0);
}

TEST_CASE("a lost queue in the same check does not take a fault from its owner", "[health]") {
  // Queue a was lost to a fault earlier; its cancelled work or refused submissions still mark it.
  // Queue b's job faults without failing (vm_fault_stop=0) and b is the only live queue that
  // completed work: the fault is b's. Found by an audit: it went to no queue, posted twice.
  Rig r;
  QueueHealth &h = r.health;
  std::shared_ptr<KernelQueue> lost;
  {
    test::ScopedKnob stop{"RVGL_EMU_VM_FAULT_STOP", "2"};  // the job fails: a is lost
    REQUIRE(stop.ok());
    lost = r.queue_with_jobs(r.fault_ib);
  }
  h.add(1, lost);
  const int64_t t0 = monotonic_ns();
  complete(h, 1, lost, 1, t0);
  REQUIRE(lost->status().lost);
  const uint32_t before = r.events.dropped_unattached();
  test::ScopedKnob mode{"RVGL_EMU_VM_FAULT_STOP", "0"};
  REQUIRE(mode.ok());
  auto b = r.queue_with_jobs(r.fault2_ib);
  h.add(2, b);
  REQUIRE_FALSE(h.completed(1, *lost, 1, t0 + 1));
  REQUIRE_FALSE(h.completed(2, *b, 1, t0 + 2));
  h.tick(t0 + 1'000'000'000);
  CHECK(b->status().flags == RVGL_QUEUE_FLAG_VM_FAULT);
  CHECK(r.events.dropped_unattached() - before == 1);  // b's VM_FAULT
}

TEST_CASE("a destroyed queue's late completion never marks the queue that took its handle",
          "[health]") {
  // The engine may report a point of a queue the VMM's thread has just destroyed, and the guest's
  // next QUEUE_CREATE gets the same handle at once: that completion is not the new queue's.
  Rig r;
  QueueHealth &h = r.health;
  auto a = r.queue_with_jobs(r.nop_ib);
  h.add(1, a);
  const int64_t t0 = monotonic_ns();
  complete(h, 1, a, 1, t0);
  h.remove(1);
  auto b = r.queue();
  h.add(1, b);
  // An interval later a check would be due for a queue marked now: none is.
  CHECK_FALSE(h.completed(1, *a, 1, t0 + 1'000'000'000));
  CHECK(h.completed_later(1, *a, 1, t0 + 1, {.ran_to_end = true}));  // nothing to hold back
  CHECK(h.completed(1, *b, 1, t0 + 1'000'000'000));  // b's own completion is marked and due
}

TEST_CASE("user queues of the whole process share one budget of looks", "[health]") {
  // 128 contexts x 62 user queues polled every 2 ms each were millions of ioctls a second on the
  // one engine thread (an audit); past 40 queues the interval grows with their number.
  CHECK(QueueHealth::user_poll_interval_ns(0) == 2'000'000);
  CHECK(QueueHealth::user_poll_interval_ns(40) == 2'000'000);
  CHECK(QueueHealth::user_poll_interval_ns(41) == 2'050'000);
  CHECK(QueueHealth::user_poll_interval_ns(128 * 62) == 396'800'000);
  CHECK(QueueHealth::user_poll_interval_ns(UINT64_MAX) > 0);
}

TEST_CASE("a fault two failed queues may have made is posted once, for no queue", "[health]") {
  // Queue a's job hangs and the timeout's soft recovery kills it (-ENODATA); queue b's job faults
  // and stops (vm_fault_stop=2: -ETIME, guilty). Both failures are in one look, and the VM's
  // fault cache names no queue (its status holds no ring). The fault went to the first failed
  // queue in handle order: a got VM_FAULT and no hang, b a hang it did not have. Nobody can tell
  // whose it is: one VM_FAULT for no queue, and each job past its timeout is a hang.
  Rig r;
  r.attach_page();
  const auto [a, b] = soft_recovered_and_faulted(r, "2");
  check_lost(*a, RVGL_QUEUE_FLAG_HANG, -ENODATA);
  check_lost(*b, RVGL_QUEUE_FLAG_GUILTY | RVGL_QUEUE_FLAG_HANG, -ETIME);
  CHECK(r.records_by_queue() ==
        std::vector<std::string>{"guilty_reset 2", "hang 1", "hang 2", "vm_fault none"});
}

TEST_CASE("a queue whose job a reset cancelled does not take the fault of the job that made it",
          "[health]") {
  // Queue a's job is lost to another context's GPU reset (-ECANCELED: it never ran, as the
  // kernel's scheduler skips a cancelled job); queue b's job faults and stops. The fault is b's,
  // though a failed too and has the lower handle.
  Rig r;
  r.attach_page();
  QueueHealth &h = r.health;
  test::ScopedKnob stop{"RVGL_EMU_VM_FAULT_STOP", "2"};
  REQUIRE(stop.ok());
  std::shared_ptr<KernelQueue> a;
  {
    test::ScopedKnob reset("RVGL_EMU_RESET_JOB", "1", "0");
    REQUIRE(reset.ok());
    a = r.queue_with_jobs(r.nop_ib);
  }
  auto b = r.queue_with_jobs(r.fault_ib);
  check_together(h, a, 1, b, 1);
  check_lost(*a, RVGL_QUEUE_FLAG_INNOCENT, -ECANCELED);
  check_lost(*b, RVGL_QUEUE_FLAG_GUILTY | RVGL_QUEUE_FLAG_VM_FAULT, -ETIME);
  CHECK(r.records_by_queue() ==
        std::vector<std::string>{"guilty_reset 2", "innocent_reset 1", "vm_fault 2"});
}

TEST_CASE("a fault while a kernel queue and a user queue are looked at is no user queue's",
          "[health]") {
  // With vm_fault_stop=0 a faulting access is dropped and the queue goes on, so a user queue's
  // fault looks like a kernel job's that completed. The only user queue looked at got it while a
  // kernel queue had completed work in the same look; PROTOCOL.md gives it to a user queue only
  // when that was the only queue the host looked at.
  Rig r;
  if (!test::DeviceUserQueue::supported(*r.dev)) return;  // gfx942: no user queues
  r.attach_page();
  QueueHealth &h = r.health;
  test::ScopedKnob mode{"RVGL_EMU_VM_FAULT_STOP", "0"};
  REQUIRE(mode.ok());
  test::DeviceUserQueue u(r.dev, 1ull << 30);
  h.add_user(3, u.q);
  fault_user_queue(u);
  auto k = r.queue_with_jobs(r.nop_ib);
  h.add(1, k);
  const int64_t t = monotonic_ns();
  h.completed(1, *k, 1, t);
  const uint64_t checks = h.checks();
  h.tick(t + 1'000'000'000);  // the user queues' look is due: one check of both
  REQUIRE(h.checks() == checks + 1);
  CHECK(u.q->status().flags == 0);
  CHECK(k->status().flags == 0);
  CHECK(r.records_by_queue() == std::vector<std::string>{"vm_fault none"});
  h.remove(3);
}

TEST_CASE("with the kernel's default a failed job does not make a fault its queue's", "[health]") {
  // vm_fault_stop=0: queue b's job faults and completes (the access is dropped); queue a's job
  // hangs and the timeout's soft recovery kills it. In one look, a's failure says nothing about
  // whose the fault is: it is no queue's. Before, the one failed job's queue got it.
  Rig r;
  r.attach_page();
  const auto [a, b] = soft_recovered_and_faulted(r, "0");
  check_lost(*a, RVGL_QUEUE_FLAG_HANG, -ENODATA);
  CHECK_FALSE(b->status().lost);
  CHECK(b->status().flags == 0);
  CHECK(r.records_by_queue() == std::vector<std::string>{"hang 1", "vm_fault none"});
}

TEST_CASE("a queue destroyed while its check is under way still has the fault the check took",
          "[health]") {
  // vm_fault_stop=2: the queue's job faulted and failed. The guest destroys the queue while the
  // engine's check has taken the fault from the cache and not yet published: remove() erased the
  // queue at once, the check found it gone and posted nothing, and no later look found the fault
  // new. Now remove() waits for the check, which posts what it saw, then erases the queue. The
  // check is held where it reads the kernel's vm_fault_stop, after taking the fault. Found by an
  // audit.
  Rig r;
  r.attach_page();
  QueueHealth &h = r.health;
  test::ScopedKnob stop{"RVGL_EMU_VM_FAULT_STOP", "2"};
  REQUIRE(stop.ok());
  auto q = r.queue_with_jobs(r.fault_ib);
  h.add(1, q);
  const int64_t t = monotonic_ns();
  REQUIRE(h.completed(1, *q, 1, t));
  std::thread remover;
  {
    HeldFaultModeRead held;
    std::thread checker([&] { h.check(t); });
    const bool reading = held.wait_for_reader();
    if (reading) {
      remover = std::thread([&] { h.remove(1); });
      // Time for remove() to get as far as it can while the check is held: before, it erased.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    held.release();
    checker.join();
    REQUIRE(reading);
  }
  if (remover.joinable()) remover.join();
  CHECK(r.records_by_queue() == std::vector<std::string>{"guilty_reset 1", "vm_fault 1"});
  check_lost(*q, RVGL_QUEUE_FLAG_GUILTY | RVGL_QUEUE_FLAG_VM_FAULT, -ETIME);
}

TEST_CASE("a fault the check leaves with a queue awaiting its hung job's signal is posted once",
          "[health]") {
  // vm_fault_stop=0: job 1 faults and runs on (the fault is in the VM's cache); job 2 hangs, and
  // the GPU reset marks the context guilty 300 ms before the hung job signals. A check in that
  // window (here job 1's completion, told late) leaves the queue to the check the signal brings.
  // It took the fault from the cache all the same and posted it for no one: the later check found
  // it no longer new. Found by an audit.
  Rig r;
  r.attach_page();
  QueueHealth &h = r.health;
  test::ScopedKnob mode{"RVGL_EMU_VM_FAULT_STOP", "0"};
  test::ScopedKnob lockup{"RVGL_EMU_LOCKUP_TIMEOUT_MS", "30",
                          std::getenv("RVGL_EMU_LOCKUP_TIMEOUT_MS") ? nullptr : "2000"};
  test::ScopedKnob hang{"RVGL_EMU_HANG_JOB", "2", "0"};
  test::ScopedKnob reset{"RVGL_EMU_FULL_RESET_US", "300000", "0"};
  REQUIRE((mode.ok() && lockup.ok() && hang.ok() && reset.ok()));
  rvgl_emu_counters before{};
  rvgl_emu_get_counters(&before, sizeof(before));
  auto q = r.queue();
  h.add(1, q);
  uint64_t seq = 0;
  REQUIRE(q->submit({&r.fault_ib, 1}, {}, 0, &seq) == 0);
  REQUIRE(q->submit({&r.nop_ib, 1}, {}, 0, &seq) == 0);  // hangs
  test::wait_signalled(*q, 1);
  // Guilty and the reset counted (what the probe reads), the hung job not yet signalled.
  REQUIRE(test::wait_for([&] {
    uint64_t flags = 0;
    rvgl_emu_counters now{};
    rvgl_emu_get_counters(&now, sizeof(now));
    return q->ctx_flags(&flags) == 0 && (flags & AMDGPU_CTX_QUERY2_FLAGS_GUILTY) &&
           now.gpu_resets > before.gpu_resets;
  }));
  int64_t t = monotonic_ns();
  const uint64_t checks = h.checks();
  complete(h, 1, q, 1, t);
  REQUIRE(h.checks() == checks + 1);
  REQUIRE(q->timeline()->known_reached() < 2);  // the check came inside the reset's window
  CHECK_FALSE(q->status().lost);
  CHECK(r.records_by_queue().empty());
  test::wait_signalled(*q, seq);
  t += 1'000'000'000;
  complete(h, 1, q, seq, t);
  // The fault and the guilty reset, once each; a hang is a timeout with no fault of its own.
  CHECK(r.records_by_queue() == std::vector<std::string>{"guilty_reset 1", "vm_fault 1"});
  check_lost(*q, RVGL_QUEUE_FLAG_GUILTY | RVGL_QUEUE_FLAG_VM_FAULT, -ETIME);
}

TEST_CASE("a fault while a user queue the look did not take is live is no kernel queue's",
          "[health]") {
  // vm_fault_stop=0: the user queue's batch faults; the kernel queue's completion brings a look
  // before the user queues' next poll marks it. A user queue's progress is invisible, so as far
  // as the fault cache tells it may be the user queue's: posted once, for no queue. Before, the
  // only kernel queue of the look took it (found by a review, 1 run in 10 through the context).
  Rig r;
  if (!test::DeviceUserQueue::supported(*r.dev)) return;  // gfx942: no user queues
  r.attach_page();
  QueueHealth &h = r.health;
  test::ScopedKnob mode{"RVGL_EMU_VM_FAULT_STOP", "0"};
  REQUIRE(mode.ok());
  test::DeviceUserQueue u(r.dev, 1ull << 30);
  h.add_user(3, u.q);
  fault_user_queue(u);
  auto k = r.queue_with_jobs(r.nop_ib);
  h.add(1, k);
  const uint64_t checks = h.checks();
  complete(h, 1, k, 1, monotonic_ns());  // the first check: at once, the user queue not marked
  REQUIRE(h.checks() == checks + 1);
  CHECK(k->status().flags == 0);
  CHECK_FALSE(k->status().lost);
  CHECK(r.records_by_queue() == std::vector<std::string>{"vm_fault none"});
  h.remove(3);
}

TEST_CASE("a fault of a queue destroyed before its completion was looked at is no other queue's",
          "[health]") {
  // vm_fault_stop=0: a's job faults and runs to its end; its check waits for the pacing interval
  // (b was just looked at) and the guest destroys a meanwhile. b's next completion brings a look
  // that finds a's fault new: the health owner had forgotten a, and gave it to b. Found by a
  // review.
  Rig r;
  r.attach_page();
  QueueHealth &h = r.health;
  test::ScopedKnob mode{"RVGL_EMU_VM_FAULT_STOP", "0"};
  REQUIRE(mode.ok());
  auto b = r.queue_with_jobs(r.nop_ib);
  h.add(2, b);
  const int64_t t0 = monotonic_ns();
  const uint64_t checks = h.checks();
  complete(h, 2, b, 1, t0);
  REQUIRE(h.checks() == checks + 1);
  REQUIRE(r.records_by_queue().empty());
  auto a = r.queue();
  h.add(1, a);
  uint64_t seq_a = 0;
  REQUIRE(a->submit({&r.fault_ib, 1}, {}, 0, &seq_a) == 0);
  test::wait_signalled(*a, seq_a);   // the fault is in the cache
  complete(h, 1, a, seq_a, t0 + 1);  // within the interval: deferred
  REQUIRE(h.checks() == checks + 1);
  h.remove(1);
  uint64_t seq_b = 0;
  REQUIRE(b->submit({&r.nop_ib, 1}, {}, 0, &seq_b) == 0);
  test::wait_signalled(*b, seq_b);
  complete(h, 2, b, seq_b, t0 + 1'000'000'000);
  REQUIRE(h.checks() == checks + 2);
  CHECK(b->status().flags == 0);
  CHECK_FALSE(b->status().lost);
  CHECK(r.records_by_queue() == std::vector<std::string>{"vm_fault none"});
  // The cache dealt with, a's memory goes: a later fault is b's again.
  uint64_t seq_f = 0;
  REQUIRE(b->submit({&r.fault2_ib, 1}, {}, 0, &seq_f) == 0);
  test::wait_signalled(*b, seq_f);
  complete(h, 2, b, seq_f, t0 + 2'000'000'000);
  CHECK(b->status().flags == RVGL_QUEUE_FLAG_VM_FAULT);
  CHECK(r.records_by_queue() == std::vector<std::string>{"vm_fault 2", "vm_fault none"});
}
