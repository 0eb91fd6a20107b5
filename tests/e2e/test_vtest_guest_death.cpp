// Guest death through the stock virgl_test_server (issue 7): a guest with GPU work queued, the SPM
// held with a SET_DEST blocked in the kernel, and GUEST userptr blobs created and mapped is
// SIGKILLed, so its socket dies mid-conversation. The server must free all of it and serve the
// next guest: SPM, context, a full copy.
//
// What "frees all of it" is shown by:
// - the SPM is acquirable again. In one server process that needs the dead context's teardown to
//   release the host arbiter and, once the blocked SET_DEST has returned, the emulated kernel's
//   SPM lock; forked per client, the lock goes with the per-client process;
// - the emulator's own counters, read from the counters file of the process that served the dead
//   guest: while it lived they show its context, objects, userptr objects and unfinished jobs;
//   afterwards contexts, objects, userptr objects, syncobjs and open device files are back where
//   they were before it came (in one server process, where a bystander guest keeps its own), and
//   every job it submitted has finished or been cancelled.
#include <poll.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "e2e_client_steps.h"
#include "emu_counters_file.h"

using namespace rvgl::e2e;
using rvgl::demo::ComputeClient;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint32_t kSpmRing = 9;
constexpr int kQueuedCopies = 48;      // x the per-job latency below: about 1 s of work queued
constexpr uint32_t kBlockedMs = 2500;  // how long the doomed guest's SET_DEST waits in the kernel

// The counters that must come back once the dead guest is torn down.
const char *const kHeld[] = {"contexts_alive", "bos_alive", "userptr_alive", "syncobjs_alive",
                             "device_files_open"};

uint64_t jobs_unfinished(const EmuCounters &c) {
  const uint64_t done = counter(c, "jobs_completed") + counter(c, "jobs_failed");
  const uint64_t sub = counter(c, "jobs_submitted");
  return sub > done ? sub - done : 0;
}

// The doomed guest, in a forked child: sets everything up, reports on `report` ("R" ready, or
// "F" and what failed) and waits to be killed. No Catch2 here: it is another process.
[[noreturn]] void doomed_guest(const std::string &socket, int report) {
  auto fail = [&](const std::string &what) {
    const std::string msg = "F" + what;
    (void)!write(report, msg.data(), msg.size());
    _exit(1);
  };
  rvgl::demo::ClientOptions co;
  co.client_name = "doomed";
  auto cr = ComputeClient::connect(socket, co);
  if (!cr) fail("connect: " + cr.error().message);
  ComputeClient &c = **cr;

  // Blobs: a GUEST userptr source and a writable GUEST userptr SPM destination, a VRAM target
  // and an IB buffer, all mapped in the GPU VM.
  const auto data = pattern(0xdead0000u);
  auto src = c.create_userptr(kCopySize, data);
  auto spm_dst = c.create_userptr(128 * 1024);
  auto dst = c.create_buffer(kCopySize, RVGL_DOMAIN_VRAM, RVGL_BO_FLAG_CPU_ACCESS);
  auto ib = c.create_buffer(4096, RVGL_DOMAIN_GTT);
  if (!src || !spm_dst || !dst || !ib) fail("blobs");
  if (!c.map_gpu(*src, RVGL_VA_FLAG_READ) || !c.map_gpu(*spm_dst) || !c.map_gpu(*dst) ||
      !c.map_gpu(*ib, RVGL_VA_FLAG_READ | RVGL_VA_FLAG_EXECUTE))
    fail("VA_MAP");

  // Work in flight: copies queued behind the emulator's per-job latency, and a fence on them.
  auto queue = c.create_queue(RVGL_IP_SDMA, kSdmaRing);
  if (!queue) fail("queue: " + queue.error().message);
  std::vector<uint32_t> words;
  rvgl::packets::sdma_copy_linear(words, dst->va, src->va, static_cast<uint32_t>(kCopySize));
  rvgl::packets::sdma_pad(words);
  for (int i = 0; i < kQueuedCopies; ++i)
    if (auto s = c.submit(*queue, *ib, 0, words); !s) fail("SUBMIT: " + s.error().message);
  if (!c.fence(kSdmaRing)) fail("fence");

  // The SPM: held, streaming into the first half, and a SET_DEST for the second half blocked in
  // the kernel until the (slow) stream fills the first or kBlockedMs pass.
  auto &s = c.session();
  auto acq = s.call<rvgl_rsp_spm_acquire>(
      [&](rvgl::guest::RequestEncoder &e) { return e.spm_acquire(0, kSpmRing); });
  if (!acq) fail("SPM_ACQUIRE: " + acq.error().message);
  rvgl::guest::SpmSetDestArgs a;
  a.object = rvgl::guest::ObjectRef::resource(spm_dst->blob.res_id);
  a.size = 64 * 1024;
  auto first = s.call<rvgl_rsp_spm_set_dest>(
      [&](rvgl::guest::RequestEncoder &e) { return e.spm_set_dest(a); });
  if (!first) fail("SPM_SET_DEST: " + first.error().message);
  a.offset = 64 * 1024;
  a.timeout_ms = kBlockedMs;
  auto enc = s.encoder();
  auto pending = enc.spm_set_dest(a);
  if (!pending || !s.submit(enc)) fail("SPM_SET_DEST (pending)");
  // A NOP answered behind it: the host has taken the SET_DEST; its answer has not come.
  auto nop = s.call<rvgl_rsp_nop>([](rvgl::guest::RequestEncoder &e) { return e.nop(); });
  if (!nop) fail("NOP: " + nop.error().message);
  auto early = s.wait(*pending, std::chrono::milliseconds(0));
  if (early.ok())
    fail("the SET_DEST was answered already (result " + std::to_string(early->result) + ")");

  (void)!write(report, "R", 1);
  for (;;)
    pause();
}

// Kills and reaps the doomed guest if the test stops before it does.
struct ChildReaper {
  pid_t pid;
  ~ChildReaper() {
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
};

// Waits for the child's report: "R", or what failed.
std::string wait_report(int fd, std::chrono::seconds timeout) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(timeout.count() * 1000)) <= 0) return "no report in time";
  char buf[512];
  const ssize_t n = read(fd, buf, sizeof(buf));
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "the guest exited without a report";
}

// Polls a counters file until `done` holds for it; the last counters read, if any.
template <class F>
std::optional<EmuCounters> poll_counters(const std::string &dir, pid_t pid, F &&done,
                                         std::chrono::seconds timeout) {
  const auto give_up = Clock::now() + timeout;
  std::optional<EmuCounters> c;
  for (;;) {
    c = read_emu_counters(dir, pid);
    if ((c && done(*c)) || Clock::now() > give_up) return c;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// The per-client server process that serves the doomed guest: the one counters file that is
// neither the server's nor one already there.
pid_t find_new_counter_pid(const VtestServer &server, const std::vector<pid_t> &known) {
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < give_up) {
    for (pid_t p : emu_counter_pids(server.emu_state_dir()))
      if (p != server.pid() && std::find(known.begin(), known.end(), p) == known.end()) return p;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

}  // namespace

TEST_CASE("a guest killed mid-flight is freed entirely; the next guest gets SPM and copies",
          "[e2e][spm][robustness]") {
  const bool one_process = GENERATE(false, true);
  INFO((one_process ? "--no-fork --multi-clients: torn down inside the server"
                    : "forked per client: torn down in the per-client process"));
  ServerOptions so;
  so.one_process = one_process;
  so.extra_env = {"RVGL_EMU_JOB_LATENCY_US=20000", "RVGL_EMU_SPM_RATE_HZ=10",
                  "RVGL_EMU_COUNTERS_INTERVAL_MS=20"};
  VtestServer server(so);
  const std::string dir = server.emu_state_dir();

  // In one process a bystander keeps its own context and objects alive throughout; they are the
  // baseline the counters must return to.
  std::unique_ptr<ComputeClient> bystander;
  const auto bystander_data = pattern(0xb5000000u);
  Copy bystander_copy;
  EmuCounters before;
  if (one_process) {
    bystander = connect(server, "bystander");
    bystander_copy = set_up_copy(*bystander, bystander_data);
    submit_copy(*bystander, bystander_copy);
    wait_ring(*bystander, kSdmaRing);
    auto c = poll_counters(
        dir, server.pid(),
        [](const EmuCounters &c) {
          return counter(c, "contexts_alive") >= 1 && jobs_unfinished(c) == 0;
        },
        std::chrono::seconds(10));
    REQUIRE(c);
    before = *c;
  }
  const auto known = emu_counter_pids(dir);

  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the test
    close(fds[0]);
    doomed_guest(server.socket_path(), fds[1]);
  }
  close(fds[1]);
  ChildReaper reaper{child};
  const std::string report = wait_report(fds[0], std::chrono::seconds(30));
  close(fds[0]);
  INFO("server output:\n" << server.log());
  if (report != "R") FAIL("the doomed guest did not get ready: " << report);

  // While it lives: its context, objects and userptr objects exist and its copies are queued.
  const pid_t served_by = one_process ? server.pid() : find_new_counter_pid(server, known);
  REQUIRE(served_by > 0);
  const auto alive = poll_counters(
      dir, served_by,
      [&](const EmuCounters &c) {
        return counter(c, "contexts_alive") > counter(before, "contexts_alive") &&
               counter(c, "userptr_alive") > counter(before, "userptr_alive") &&
               jobs_unfinished(c) > 0;
      },
      std::chrono::seconds(10));
  REQUIRE(alive);
  CHECK(counter(*alive, "contexts_alive") > counter(before, "contexts_alive"));
  CHECK(counter(*alive, "userptr_alive") > counter(before, "userptr_alive"));
  CHECK(counter(*alive, "bos_alive") > counter(before, "bos_alive"));
  CHECK(jobs_unfinished(*alive) > 0);

  REQUIRE(kill(child, SIGKILL) == 0);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  reaper.pid = -1;
  REQUIRE(WIFSIGNALED(status));

  // Afterwards: everything it held is gone and no job of its is left running.
  const auto after = poll_counters(
      dir, served_by,
      [&](const EmuCounters &c) {
        for (const char *k : kHeld)
          if (counter(c, k) != counter(before, k)) return false;
        return jobs_unfinished(c) == 0;
      },
      std::chrono::seconds(20));
  REQUIRE(after);
  for (const char *k : kHeld) {
    INFO(k);
    CHECK(counter(*after, k) == counter(before, k));
  }
  CHECK(jobs_unfinished(*after) == 0);

  // The next guest: takes the SPM (once the blocked SET_DEST has come back: bounded by its
  // timeout), creates its context and does a whole copy.
  auto next = connect(server, "next");
  const auto give_up = Clock::now() + std::chrono::seconds(15);
  int r = -EBUSY;
  while (r == -EBUSY && Clock::now() < give_up) {
    r = spm_acquire(*next, kSpmRing);
    if (r == -EBUSY) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(r == 0);
  run_copy(*next, 0x0e070000u);
  CHECK(spm_release(*next) == 0);
  CHECK(next->session().shared_page().async_error() == 0);
  if (bystander) {  // its context was left alone: no event reached it, and it copies again
    CHECK(bystander->session().events().pending() == 0);
    std::memset(bystander_copy.dst.memory().data(), 0, kCopySize);
    submit_copy(*bystander, bystander_copy);
    wait_ring(*bystander, kSdmaRing);
    CHECK(std::memcmp(bystander_copy.dst.memory().data(), bystander_data.data(), kCopySize) == 0);
  }
  CHECK(server.running());
}
