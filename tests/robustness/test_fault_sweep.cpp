// Issue 7: fail each call the context makes into the kernel at each position of a scripted guest
// workload. The names and their call counts come from clean runs (the emulator counts every
// thread's calls per RVGL_EMU_FAIL name), so the sweep follows the workload as the library
// changes. Every run must end with the work done or the guest told (an errno, an event or a lost
// queue), with the kernel's errno as it was; every fence the VMM made must retire, error or not
// (proto/PROTOCOL.md §5 "Rings and fences"), and only once; the host stays up and the kernel and
// the host are left with nothing of ours (LSan covers host memory in the sanitizer build). Both
// delivery modes (async fence callbacks and poll), also with queues that have no user fence and
// with jobs still running when the fences are made; robustness-no-eventfd runs it on the
// completion engine's wait path (SYNCOBJ_TIMELINE_WAIT / _SIGNAL).
#include <catch2/catch.hpp>

#include <dirent.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "queue/completion_engine.h"
#include "robustness/robust_support.h"

using namespace rvgl;
using namespace rvgl::test;
namespace pk = rvgl::packets;

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint32_t kCtxId = 77;
// Every fence of a run retires within this, error or not. The engine's slowest own path is its
// 250 ms safety net; a queue the kernel never reports on is lost after about a second.
constexpr int kFenceDeadlineMs = 5000;

struct FenceMade {
  uint32_t ring;
  uint64_t id;
  uint64_t point;  // the last SUBMIT's seq on the ring's queue when the fence was made (0: none)
};

struct Outcome {
  bool data_ok = false;
  std::vector<std::string> told;  // each way the guest or the VMM was told, with its errno
  std::vector<int32_t> errnos;    // every non-zero result the guest or the VMM got
  // Fences made that had not retired by the deadline, and any delivered twice or never made.
  std::vector<std::string> unretired;
  std::string harness_error;  // the test's own failure: never counts as "told"
};

// What the emulator counted per name since the rule (or counting) started.
std::map<std::string, uint64_t> call_counts() {
  std::string text(rvgl_emu_call_counts(nullptr, 0) + 1, '\0');
  rvgl_emu_call_counts(text.data(), text.size());
  std::map<std::string, uint64_t> out;
  std::istringstream in(text);
  std::string name;
  uint64_t n;
  while (in >> name >> n)
    out[name] = n;
  return out;
}

// The scripted guest: shared page, two BOs, a userptr blob, SDMA copy userptr -> BO, PM4 write,
// fences on both queues' rings, then teardown. A failure the guest sees skips the rest of the
// work, but once there is a context the guest still makes its fences (a virtio guest's fenced
// EXECBUFFER makes one whatever its commands did) and tears down what it made.
class Workload {
 public:
  explicit Workload(bool async) : async_(async) {}

  Outcome run() {
    try {
      run_guest();
    } catch (const std::exception &e) {
      o_.harness_error = e.what();
    }
    return std::move(o_);
  }

 private:
  // A guest-visible result: non-zero means the guest got an errno.
  bool failed(const char *what, int32_t r) {
    if (!r) return false;
    o_.told.push_back(std::string(what) + " " + std::to_string(r));
    o_.errnos.push_back(r);
    return true;
  }

  void run_guest() {
    UniqueFd memfd(memfd_create("sweep-ram", MFD_CLOEXEC));
    if (!memfd || ftruncate(memfd.get(), 16 * kPage)) throw std::runtime_error("test: memfd");
    Mapping ram = Mapping::map_shared(memfd.get(), 16 * kPage, PROT_READ | PROT_WRITE);
    if (!ram.valid()) throw std::runtime_error("test: map guest RAM");
    for (uint32_t i = 0; i < 4 * kPage / 4; ++i)
      ram.as<uint32_t>()[i] = i * 3 + 1;

    std::optional<ContextHarness> ctx;
    try {
      ctx.emplace(test_config(), async_, kCtxId);
    } catch (const ContextCreateError &e) {
      failed("context create", e.err);
      return;
    }
    ContextHarness &h = *ctx;
    bool ok = shared_page(h);
    const uint64_t va = h.capset().va_start;
    std::optional<ContextHarness::HostBuffer> dst, ib;
    if (ok) ok = (dst = mapped_bo(h, 4 * kPage)).has_value();
    if (ok) ok = (ib = mapped_bo(h, kPage)).has_value();
    BlobArgs a;
    a.res_id = h.next_res_id();
    a.blob_mem = RVGL_BLOB_MEM_GUEST;
    a.blob_flags = RVGL_BLOB_FLAG_USERPTR;
    a.size = 4 * kPage;
    const iovec iov{ram.get(), 4 * kPage};
    a.iov = {&iov, 1};
    BlobExport e;
    const bool userptr = ok && !failed("userptr create_blob", h.ctx().create_blob(a, &e));
    ok = userptr;

    int32_t r = 0;
    const bool mapped =
        ok && !failed("VA_MAP dst", h.va_map(dst->bo, 0, 0, va, 4 * kPage)) &&
        !failed("VA_MAP userptr", h.va_map(0, a.res_id, 0, va + (1 << 20), 4 * kPage)) &&
        !failed("VA_MAP ib", h.va_map(ib->bo, 0, 0, va + (2 << 20), kPage));
    ok = mapped;
    uint32_t sdma = 0, compute = 0;
    if (ok) {
      sdma = h.queue_create(RVGL_IP_SDMA, 1, &r);
      ok = !failed("QUEUE_CREATE sdma", r);
    }
    if (ok) {
      compute = h.queue_create(RVGL_IP_COMPUTE, 2, &r);
      ok = !failed("QUEUE_CREATE compute", r);
    }
    uint64_t sdma_seq = 0, compute_seq = 0;
    if (ok) {
      std::vector<uint32_t> copy;
      pk::sdma_copy_linear(copy, va, va + (1 << 20), 4 * kPage - 16);
      pk::sdma_pad(copy);
      sdma_seq = h.submit(sdma, {ContextHarness::write_ib(*ib, va + (2 << 20), copy)}, {}, &r);
      ok = !failed("SUBMIT sdma", r);
    }
    if (ok) {
      std::vector<uint32_t> w;
      pk::pm4_write_data(w, va + 4 * kPage - 16, {0xfeedu, 0xbeefu});
      compute_seq = h.submit(compute, {ContextHarness::write_ib(*ib, va + (2 << 20), w, 2048)},
                             {{sdma, 0, sdma_seq}}, &r);
      ok = !failed("SUBMIT compute", r);
    }

    // The fences, whatever happened before (once there is a context): ring 1 is the SDMA queue's,
    // ring 2 the compute queue's (an unbound ring retires as ring 0).
    std::vector<FenceMade> made;
    for (const FenceMade f : {FenceMade{1, 1, sdma_seq}, FenceMade{2, 2, compute_seq}}) {
      if (!failed(f.ring == 1 ? "create_fence ring 1" : "create_fence ring 2",
                  h.fence(f.ring, f.id)))
        made.push_back(f);
      else
        ok = false;
    }
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(kFenceDeadlineMs);
    for (const FenceMade &f : made) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (!h.wait_fence(f.ring, f.id, static_cast<int>(std::max<int64_t>(left.count(), 0)))) {
        std::ostringstream s;
        s << "context " << kCtxId << " ring " << f.ring << " fence " << f.id << " point " << f.point
          << " (" << (async_ ? "async" : "poll mode") << ")";
        o_.unretired.push_back(s.str());
        ok = false;
      }
    }
    // Only the fences made, each once.
    const auto log = h.fences().snapshot();
    for (const RetiredFence &f : log) {
      const auto same = [&](const auto &g) { return g.ring == f.ring && g.id == f.id; };
      if (std::count_if(log.begin(), log.end(), same) != 1 ||
          std::none_of(made.begin(), made.end(), same))
        o_.unretired.push_back("ring " + std::to_string(f.ring) + " fence " + std::to_string(f.id) +
                               " delivered but not made, or twice");
    }
    for (const uint32_t q : {sdma, compute}) {
      if (!q) continue;
      auto st = h.queue_state(q);
      if (failed("QUEUE_STATE", st.hdr.result)) {
        ok = false;
      } else if (st.state != RVGL_QUEUE_STATE_OK) {
        o_.told.push_back("queue " + std::to_string(q) + " lost, error " +
                          std::to_string(st.error));
        o_.errnos.push_back(st.error);
        ok = false;
      }
    }
    for (const rvgl_event &ev : h.shmem() ? read_events(h) : std::vector<rvgl_event>()) {
      o_.told.push_back("event " + std::to_string(ev.type) + " queue " + std::to_string(ev.queue));
      ok = false;
    }
    if (ok)
      o_.data_ok = std::memcmp(dst->ptr(), ram.get(), 4 * kPage - 16) == 0 &&
                   dst->ptr<uint32_t>()[kPage - 4] == 0xfeedu;

    // Teardown through the guest's own requests, then the VMM's detach and the context's end.
    if (mapped) failed("VA_UNMAP", h.va_unmap(va, 4 * kPage));
    if (dst) failed("BO_FREE", h.bo_free(dst->bo));
    if (sdma) failed("QUEUE_DESTROY", h.queue_destroy(sdma));
    if (userptr) h.ctx().detach_resource(a.res_id);
  }

  bool shared_page(ContextHarness &h) {
    uint32_t res_id;
    return !failed("shared page create_blob", h.try_create_shmem(&res_id));
  }

  // A CPU-visible GTT buffer as a guest makes one: BO_CREATE, then the VMM's blob claim and map.
  std::optional<ContextHarness::HostBuffer> mapped_bo(ContextHarness &h, uint64_t size) {
    ContextHarness::HostBuffer b;
    const uint64_t blob_id = ++blob_id_;
    int32_t r;
    b.bo = h.bo_create(size, RVGL_DOMAIN_GTT, 0, blob_id, &r);
    if (failed("BO_CREATE", r)) return std::nullopt;
    BlobArgs a;
    a.res_id = b.res_id = h.next_res_id();
    a.blob_mem = RVGL_BLOB_MEM_HOST3D;
    a.blob_flags = RVGL_BLOB_FLAG_USE_MAPPABLE;
    a.blob_id = blob_id;
    a.size = size;
    BlobExport e;
    if (failed("BO claim create_blob", h.ctx().create_blob(a, &e))) return std::nullopt;
    b.map = Mapping::map_shared(e.fd.get(), size, PROT_READ | PROT_WRITE);
    if (!b.map.valid()) throw std::runtime_error("test: map the claimed blob's fd");
    b.size = size;
    return b;
  }

  bool async_;
  uint64_t blob_id_ = 0;
  Outcome o_;
};

// Clean runs that learn what the workload calls. Most names are called as often in every run;
// the completion engine's calls (health checks, registrations, its wait loop) and poll mode's own
// looks and registrations depend on when jobs end, so some are made a varying number of times.
constexpr int kCleanRuns = 20;
// A position only some clean runs reached is tried up to this many times until its call is made.
constexpr int kTimingTries = 10;
// A position every clean run reached is reached by a run that fails it, which is the same run
// until that call; but the engine's calls follow the host's timing, which is not the same for the
// clean runs and the later ones (its wait loop turned 2 to 8 times in clean runs of one process):
// one that does not come is asked for again.
constexpr int kFixedTries = 10;

std::string joined(const std::vector<std::string> &v) {
  std::string s;
  for (const auto &x : v)
    s += (s.empty() ? "" : "; ") + x;
  return s;
}

std::set<int> open_fds() {
  std::set<int> fds;
  DIR *d = opendir("/proc/self/fd");
  if (!d) throw std::runtime_error("test: /proc/self/fd");
  while (const dirent *e = readdir(d))
    if (e->d_name[0] != '.') fds.insert(std::atoi(e->d_name));
  fds.erase(dirfd(d));
  closedir(d);
  return fds;
}

// What a run leaves behind once its context is gone.
struct Baseline {
  rvgl_emu_counters kernel = emu_counters();
  std::set<int> fds = open_fds();
};

bool back_to(const Baseline &base) {
  // A job the kernel still runs holds its context until it finishes; the completion engine's
  // thread goes with the last context.
  return wait_for([&] {
    const auto c = emu_counters();
    const auto &b = base.kernel;
    return c.bos_alive == b.bos_alive && c.userptr_alive == b.userptr_alive &&
           c.contexts_alive == b.contexts_alive && c.syncobjs_alive == b.syncobjs_alive &&
           c.device_files_open == b.device_files_open && c.udmabufs_alive == b.udmabufs_alive &&
           CompletionEngine::threads_running() == 0 && open_fds() == base.fds;
  });
}

struct CallRange {
  uint64_t min, max;  // over the clean runs
};

struct Totals {
  uint64_t runs = 0, fired = 0, told = 0, completed = 0;
  uint64_t fixed_positions = 0, fixed_fired = 0;
  uint64_t timing_positions = 0, timing_fired = 0;
};

// One run with the nth call of `name` failing with EIO (and `base`'s rules, which the clean runs
// had too); every promise is checked. Returns whether the call was made, and so failed.
bool injected_run(bool async, const std::string &base_rule, const std::string &name, uint64_t n,
                  const Baseline &base, Totals &t) {
  const std::string rule =
      name + ":" + std::to_string(n) + ":EIO" + (base_rule.empty() ? "" : "," + base_rule);
  INFO(rule);
  rvgl_emu_reset_fault_injection();
  REQUIRE(rvgl_emu_set_knob("RVGL_EMU_FAIL", rule.c_str()) == 0);
  const auto before = emu_counters().injected_failures;
  const Outcome o = Workload(async).run();
  const auto injected = emu_counters().injected_failures - before;
  const auto counts = call_counts();
  rvgl_emu_reset_fault_injection();
  const auto it = counts.find(name);
  const uint64_t fired = it != counts.end() && it->second >= n;
  ++t.runs;
  t.fired += fired;
  t.told += !o.told.empty();
  t.completed += o.data_ok;
  INFO("told: " << joined(o.told));
  // The rule fails that call only.
  if (base_rule.empty()) CHECK(injected == fired);
  // The test's own helpers failed: nothing was shown about the product.
  CHECK(o.harness_error == "");
  // Every fence the VMM made retired, error or not.
  CHECK(joined(o.unretired) == "");
  // Done, or told. A kernel error the host cannot foresee reaches the guest as it is
  // (proto/PROTOCOL.md §6; a queue lost to failing queries reports -EIO: docs/robustness.md 5).
  CHECK((o.data_ok || !o.told.empty()));
  for (const int32_t e : o.errnos)
    CHECK(e == -EIO);
  // Nothing of ours is left in the kernel or the host (threads, fds) once the context is gone.
  CHECK(back_to(base));
  return fired;
}

// `variant` names the test case's setting; `base_rule` (RVGL_EMU_FAIL) holds in every run.
void sweep(bool async, const std::string &variant = "", const std::string &base_rule = "") {
  const std::string mode = std::string(async ? "async callbacks" : "poll mode") +
                           (variant.empty() ? "" : ", ") + variant;
  INFO(mode);
  rvgl_emu_reset_fault_injection();
  std::optional<Baseline> base;

  // The clean runs: what they call, and how often.
  std::map<std::string, CallRange> ranges;
  for (int i = 0; i < kCleanRuns; ++i) {
    rvgl_emu_count_calls();
    if (!base_rule.empty()) REQUIRE(rvgl_emu_set_knob("RVGL_EMU_FAIL", base_rule.c_str()) == 0);
    const Outcome clean = Workload(async).run();
    auto counts = call_counts();
    rvgl_emu_reset_fault_injection();
    INFO("clean run " << i << ": " << joined(clean.told) << joined(clean.unretired)
                      << clean.harness_error);
    REQUIRE(clean.harness_error.empty());
    REQUIRE(clean.told.empty());
    REQUIRE(clean.unretired.empty());
    REQUIRE(clean.data_ok);
    // The first run opens what the emulator keeps for the process (its state directory).
    if (!base) base.emplace();
    REQUIRE(back_to(*base));
    for (auto &[name, r] : ranges)
      counts.try_emplace(name, 0);  // a name this run did not call at all
    for (const auto &[name, n] : counts) {
      CallRange &r = ranges.try_emplace(name, CallRange{i ? 0 : UINT64_MAX, 0}).first->second;
      r.min = std::min(r.min, n);
      r.max = std::max(r.max, n);
    }
  }
  std::string names;
  for (const auto &[name, r] : ranges)
    names += " " + name + "=" + std::to_string(r.min) +
             (r.max > r.min ? "-" + std::to_string(r.max) : std::string());
  std::printf("fault sweep (%s): calls of %d clean runs:%s\n", mode.c_str(), kCleanRuns,
              names.c_str());

  Totals t;
  uint64_t fixed_calls = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const auto &[name, r] : ranges) {
    // The base rule fails every call of its name already.
    if (!base_rule.empty() && base_rule.starts_with(name + ":")) continue;
    fixed_calls += r.min;
    for (uint64_t n = 1; n <= r.max; ++n) {
      const bool fixed = n <= r.min;
      (fixed ? t.fixed_positions : t.timing_positions)++;
      bool fired = false;
      for (int i = 0; i < (fixed ? kFixedTries : kTimingTries) && !fired; ++i)
        fired = injected_run(async, base_rule, name, n, *base, t);
      (fixed ? t.fixed_fired : t.timing_fired) += fired;
      INFO(name << ":" << n);
      // Every call every clean run made is failed once.
      if (fixed) CHECK(fired);
    }
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  std::printf(
      "fault sweep (%s): %zu names, %llu calls made by every clean run each failed once, %llu of "
      "%llu made by some failed too; %llu runs, %llu told the guest, %llu completed, %lld ms\n",
      mode.c_str(), ranges.size(), static_cast<unsigned long long>(t.fixed_fired),
      static_cast<unsigned long long>(t.timing_fired),
      static_cast<unsigned long long>(t.timing_positions), static_cast<unsigned long long>(t.runs),
      static_cast<unsigned long long>(t.told), static_cast<unsigned long long>(t.completed),
      static_cast<long long>(ms));
  CHECK(t.fixed_positions == fixed_calls);
  CHECK(t.fixed_fired == fixed_calls);
}

}  // namespace

TEST_CASE("fault-injection sweep over every kernel call of a guest workload, poll mode",
          "[robust][sweep]") {
  sweep(false);
}

TEST_CASE("fault-injection sweep over every kernel call of a guest workload, async callbacks",
          "[robust][sweep]") {
  sweep(true);
}

TEST_CASE("fault-injection sweep, queues without a user fence", "[robust][sweep]") {
  // Every user fence's GEM_MMAP fails: a queue sees its completions through its timeline alone,
  // and a check asks each job's error of the kernel (WAIT_CS).
  sweep(false, "no user fence", "GEM_MMAP:1+:EIO");
  sweep(true, "no user fence", "GEM_MMAP:1+:EIO");
}

TEST_CASE("fault-injection sweep, fences made while the work still runs", "[robust][sweep]") {
  // Each job takes 2 ms: the fences wait for the engine's registrations and wakeups rather than
  // retiring inside create_fence, and the health checks come after them.
  ScopedKnob latency("RVGL_EMU_JOB_LATENCY_US", "2000");
  REQUIRE(latency.ok());
  sweep(false, "2 ms jobs");
  sweep(true, "2 ms jobs");
}
