#include "robustness/fault_sweep.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "queue/completion_engine.h"
#include "support/emu_call_counts.h"
#include "support/file_mappings.h"

namespace rvgl::test::sweep {

std::string joined(const std::vector<std::string> &v) {
  std::string s;
  for (const auto &x : v)
    s += (s.empty() ? "" : "; ") + x;
  return s;
}

namespace {

// How two readings of the kernel objects of ours that the emulator counts differ ("" when they
// do not). `device_files`: open device files too (the first run may keep the process's own).
std::string kernel_differences(const rvgl_emu_counters &now, const rvgl_emu_counters &then,
                               bool device_files) {
  std::ostringstream s;
  const auto differs = [&](const char *what, uint64_t a, uint64_t b) {
    if (a != b) s << what << " " << a << " (baseline " << b << ") ";
  };
  differs("BOs", now.bos_alive, then.bos_alive);
  differs("userptr objects", now.userptr_alive, then.userptr_alive);
  differs("kernel contexts", now.contexts_alive, then.contexts_alive);
  differs("syncobjs", now.syncobjs_alive, then.syncobjs_alive);
  if (device_files) differs("device files", now.device_files_open, then.device_files_open);
  differs("udmabufs", now.udmabufs_alive, then.udmabufs_alive);
  differs("user queues", now.userqs_alive, then.userqs_alive);
  return s.str();
}

// What a run left that the baseline did not have ("" once everything is back to it).
std::string left_behind(const Baseline &base) {
  std::string s = kernel_differences(emu_counters(), base.kernel, true);
  if (const int threads = CompletionEngine::threads_running())
    s += "engine threads " + std::to_string(threads) + " (baseline 0) ";
  const std::set<int> fds = open_fds();
  if (fds != base.fds)
    s +=
        "fds " + std::to_string(fds.size()) + " (baseline " + std::to_string(base.fds.size()) + ")";
  return s;
}

// The kernel's objects are as in the baseline, and the descriptors open are some of its own but
// not all.
bool only_fewer_fds(const Baseline &base) {
  wait_for([&] { return left_behind(base).empty(); }, 200);
  const std::set<int> fds = open_fds();
  return fds.size() < base.fds.size() &&
         std::includes(base.fds.begin(), base.fds.end(), fds.begin(), fds.end()) &&
         kernel_differences(emu_counters(), base.kernel, true).empty();
}

bool settled_since(const rvgl_emu_counters &before_runs) {
  return wait_for([&] {
    return kernel_differences(emu_counters(), before_runs, false).empty() &&
           CompletionEngine::threads_running() == 0;
  });
}

}  // namespace

bool back_to(const Baseline &base) {
  // A job the kernel still runs holds its context until it finishes; the completion engine's
  // thread goes with the last context.
  if (wait_for([&] { return left_behind(base).empty(); })) return true;
  UNSCOPED_INFO("left behind: " << left_behind(base));
  return false;
}

namespace {

// Every fence of a run retires within this, error or not. The engine's slowest own path is its
// 250 ms safety net; a queue the kernel never reports on is lost after about a second.
constexpr int kFenceDeadlineMs = 5000;

// Clean runs that learn what the workload calls. The guest's own calls (this thread's: the
// workload runs here, as a VMM's thread serves its guest) come in program order; the completion
// engine's (health checks, registrations, its wait loop), the SPM worker's and poll mode's own
// looks depend on when jobs end, so some names are called a varying number of times, and a count
// every clean run of one process happened to reach can be missed by later runs (the engine's
// SYNCOBJ_TIMELINE_WAIT 6 times in each of 20 clean runs, then never a 6th in 40 runs on a loaded
// machine).
constexpr int kCleanRuns = 20;
// A position only some clean runs reached is tried up to this many times until its call is made.
constexpr int kTimingTries = 10;
// A position the guest's own calls reached in every clean run (CallRange::fixed) is reached by a
// run that fails it, which is the same run until that call, whichever thread makes it; a poll-mode
// guest's thread also delivers fences, whose calls vary a little with timing: one that does not
// come is asked for again. A run costs about a millisecond.
constexpr int kFixedTries = 40;

struct CallRange {
  uint64_t min, max;  // every thread's calls, over the clean runs
  uint64_t fixed;     // the guest's own calls, the fewest of any clean run
};

struct Totals {
  uint64_t runs = 0, fired = 0, told = 0, completed = 0;
  uint64_t fixed_positions = 0, fixed_fired = 0;
  uint64_t timing_positions = 0, timing_fired = 0;
};

// One run with the nth call of `name` (and with kFromThenOn every later one) failing with EIO
// (and `base`'s rules, which the clean runs had too); every promise is checked. Returns whether
// the call was made, and so failed.
bool injected_run(const Workload &workload, bool async, const std::string &base_rule,
                  Failure failure, const std::string &name, uint64_t n, const Baseline &base,
                  Totals &t) {
  const std::string rule = name + ":" + std::to_string(n) +
                           (failure == Failure::kFromThenOn ? "+" : "") + ":EIO" +
                           (base_rule.empty() ? "" : "," + base_rule);
  INFO(rule);
  rvgl_emu_reset_fault_injection();
  REQUIRE(rvgl_emu_set_knob("RVGL_EMU_FAIL", rule.c_str()) == 0);
  const auto before = emu_counters().injected_failures;
  const Outcome o = workload(async)->run();
  const auto injected = emu_counters().injected_failures - before;
  const auto counts = emu_call_counts();
  rvgl_emu_reset_fault_injection();
  const auto it = counts.find(name);
  const uint64_t fired = it != counts.end() && it->second >= n;
  ++t.runs;
  t.fired += fired;
  t.told += !o.told.empty();
  t.completed += o.data_ok;
  INFO("told: " << joined(o.told));
  // The rule fails that call only (or from it on).
  if (base_rule.empty() && failure == Failure::kOnce) CHECK(injected == fired);
  if (base_rule.empty() && failure == Failure::kFromThenOn) CHECK((injected >= 1) == fired);
  // The test's own helpers failed: nothing was shown about the product.
  CHECK(o.harness_error == "");
  // Every fence the VMM made retired, error or not.
  CHECK(joined(o.unretired) == "");
  // The VMM's detach ended every use of the guest's pages, whatever failed before it. Except
  // where the emulator refused a call no kernel fails for a handle that exists: GEM_CLOSE
  // (drm_gem_handle_delete() fails only for an unknown handle) and BO_LIST's destroy
  // (amdgpu_bo_list_destroy() returns nothing), refused with the rest from then on. The object
  // then lives on in the kernel, but out of the GPU's reach: its VA mappings went first, and a
  // list whose destroy failed is never named by a CS again (KernelBoList forgets it).
  const bool kernel_kept_it =
      name == "GEM_CLOSE" || (name == "BO_LIST" && failure == Failure::kFromThenOn);
  if (!kernel_kept_it) CHECK(joined(o.in_use) == "");
  // Done, or told. A kernel error the host cannot foresee reaches the guest as it is
  // (proto/PROTOCOL.md §6; a queue lost to failing queries reports -EIO: docs/robustness.md 5).
  CHECK((o.data_ok || !o.told.empty()));
  for (const int32_t e : o.errnos)
    CHECK(e == -EIO);
  // Nothing of ours is left in the kernel or the host (threads, fds) once the context is gone.
  CHECK(back_to(base));
  return fired;
}

}  // namespace

Outcome SweepGuest::run() {
  try {
    run_guest();
  } catch (const std::exception &e) {
    o_.harness_error = e.what();
  }
  return std::move(o_);
}

bool SweepGuest::failed(const char *what, int32_t r) {
  if (!r) return false;
  told(what, r);
  return true;
}

void SweepGuest::told(std::string what, int32_t err) {
  o_.told.push_back(std::move(what) + " " + std::to_string(err));
  o_.errnos.push_back(err);
}

bool SweepGuest::fences(ContextHarness &h, const std::vector<FenceMade> &want) {
  bool ok = true;
  std::vector<FenceMade> made;
  for (const FenceMade &f : want) {
    const std::string what = "create_fence ring " + std::to_string(f.ring);
    if (!failed(what.c_str(), h.fence(f.ring, f.id)))
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
      s << "context " << ctx_id_ << " ring " << f.ring << " fence " << f.id << " point " << f.point
        << " (" << (async_ ? "async" : "poll mode") << ")";
      o_.unretired.push_back(s.str());
      ok = false;
    }
  }
  // The health owner's look at the work before the guest goes on: a check the pacer deferred
  // (one per interval per context) would race the teardown's QUEUE_DESTROY, and the calls it
  // makes (WAIT_CS for a job with no user fence) would come in some clean runs only, a position
  // every run must reach (the kernel refusing a call there makes it look again, for a second at
  // most, then give the queue up).
  if (!wait_for([&] { return h.ctx().health().settled(); }))
    o_.unretired.push_back("context " + std::to_string(ctx_id_) +
                           ": the health owner did not look at its queues' completions in 5 s");
  // Only the fences made, each once.
  const auto log = h.fences().snapshot();
  for (const RetiredFence &f : log) {
    const auto same = [&](const auto &g) { return g.ring == f.ring && g.id == f.id; };
    if (std::count_if(log.begin(), log.end(), same) != 1 ||
        std::none_of(made.begin(), made.end(), same))
      o_.unretired.push_back("ring " + std::to_string(f.ring) + " fence " + std::to_string(f.id) +
                             " delivered but not made, or twice");
  }
  return ok;
}

bool SweepGuest::queues_ok(ContextHarness &h, const std::vector<uint32_t> &queues) {
  bool ok = true;
  for (const uint32_t q : queues) {
    if (!q) continue;
    auto st = h.queue_state(q);
    if (failed("QUEUE_STATE", st.hdr.result)) {
      ok = false;
    } else if (st.state != RVGL_QUEUE_STATE_OK) {
      told("queue " + std::to_string(q) + " lost, error", st.error);
      ok = false;
    }
  }
  return ok;
}

PageHolders PageHolders::now(int guest_ram_fd) {
  const rvgl_emu_counters c = emu_counters();
  return {c.userptr_alive, c.udmabufs_alive, file_mapping_count(guest_ram_fd)};
}

std::string PageHolders::differs(const PageHolders &before) const {
  std::ostringstream s;
  auto add = [&](const char *what, uint64_t then, uint64_t now) {
    if (then != now) s << what << " " << then << " -> " << now << "; ";
  };
  add("userptr objects", before.userptrs, userptrs);
  add("udmabufs", before.udmabufs, udmabufs);
  add("mappings of guest RAM", before.file_maps, file_maps);
  return s.str();
}

void SweepGuest::pages_released(const PageHolders &before, int guest_ram_fd, const char *after) {
  const std::string left = PageHolders::now(guest_ram_fd).differs(before);
  if (!left.empty()) o_.in_use.push_back(std::string("after ") + after + ": " + left);
}

bool SweepGuest::no_events(ContextHarness &h) {
  bool none = true;
  for (const rvgl_event &ev : h.shmem() ? read_events(h) : std::vector<rvgl_event>()) {
    o_.told.push_back("event " + std::to_string(ev.type) + " queue " + std::to_string(ev.queue));
    none = false;
  }
  return none;
}

ContextHarness *SweepGuest::open_context(std::optional<ContextHarness> &ctx, bool *page_ok) {
  try {
    ctx.emplace(test_config(), async_, ctx_id_);
  } catch (const ContextCreateError &e) {
    failed("context create", e.err);
    return nullptr;
  }
  uint32_t res_id;
  *page_ok = !failed("shared page create_blob", ctx->try_create_shmem(&res_id));
  return &*ctx;
}

std::optional<ContextHarness::HostBuffer> SweepGuest::mapped_bo(ContextHarness &h, uint64_t size,
                                                                uint32_t domain) {
  ContextHarness::HostBuffer b;
  const uint64_t blob_id = ++blob_id_;
  int32_t r;
  b.bo = h.bo_create(size, domain, 0, blob_id, &r);
  if (failed("BO_CREATE", r)) return std::nullopt;
  b.res_id = h.next_res_id();
  BlobExport e;
  if (failed("BO claim create_blob", h.create_blob(b.res_id, RVGL_BLOB_MEM_HOST3D,
                                                   RVGL_BLOB_FLAG_USE_MAPPABLE, blob_id, size, &e)))
    return std::nullopt;
  b.map = Mapping::map_shared(e.fd.get(), size, PROT_READ | PROT_WRITE);
  if (!b.map.valid()) throw std::runtime_error("test: map the claimed blob's fd");
  b.size = size;
  return b;
}

void check_clean_run(const Outcome &clean, int run, const std::string &what,
                     const rvgl_emu_counters &before_runs, std::optional<Baseline> &base) {
  INFO("clean run " << run << ": " << joined(clean.told) << joined(clean.unretired)
                    << joined(clean.in_use) << clean.harness_error);
  REQUIRE(clean.harness_error.empty());
  REQUIRE(clean.told.empty());
  REQUIRE(clean.unretired.empty());
  REQUIRE(clean.in_use.empty());
  REQUIRE(clean.data_ok);
  // The first run opens what the emulator keeps for the process (its state directory). Its
  // context is gone, but a job the emulated kernel still finishes holds its kernel context and
  // objects a little longer (as the kernel does): the baseline waits for the kernel's objects to
  // be as before the run, and for no engine thread, or it would count them and no later run
  // would match.
  if (!base) {
    REQUIRE(settled_since(before_runs));
    base.emplace();
  } else if (only_fewer_fds(*base)) {
    // A descriptor open when the baseline was taken has closed since: that is no leak of this
    // run's, so the baseline is the state now (a leak shows as more, never as fewer).
    std::printf("%s: baseline retaken after clean run %d (%zu fds, was %zu)\n", what.c_str(), run,
                open_fds().size(), base->fds.size());
    base.emplace();
  }
  REQUIRE(back_to(*base));
}

void sweep(const Workload &workload, const MustCall &must_call, bool async,
           const std::string &variant, const std::string &base_rule, Failure failure) {
  const std::string mode = std::string(async ? "async callbacks" : "poll mode") +
                           (variant.empty() ? "" : ", ") + variant +
                           (failure == Failure::kFromThenOn ? ", failing from then on" : "");
  INFO(mode);
  rvgl_emu_reset_fault_injection();
  std::optional<Baseline> base;
  // The kernel's objects before any run: the first run's are all gone again before the baseline
  // is taken (its descriptors cannot be compared yet, see below).
  const rvgl_emu_counters before_runs = emu_counters();

  // The clean runs: what they call, and how often.
  std::map<std::string, CallRange> ranges;
  for (int i = 0; i < kCleanRuns; ++i) {
    rvgl_emu_count_calls();
    if (!base_rule.empty()) REQUIRE(rvgl_emu_set_knob("RVGL_EMU_FAIL", base_rule.c_str()) == 0);
    const Outcome clean = workload(async)->run();
    auto counts = emu_call_counts();
    const auto own = emu_call_counts(rvgl_emu_counting_thread_call_counts);  // the guest's own
    rvgl_emu_reset_fault_injection();
    check_clean_run(clean, i, "fault sweep (" + mode + ")", before_runs, base);
    for (auto &[name, r] : ranges)
      counts.try_emplace(name, 0);  // a name this run did not call at all
    for (const auto &[name, n] : counts) {
      const uint64_t first = i ? 0 : UINT64_MAX;
      CallRange &r = ranges.try_emplace(name, CallRange{first, 0, first}).first->second;
      r.min = std::min(r.min, n);
      r.max = std::max(r.max, n);
      const auto o = own.find(name);
      r.fixed = std::min(r.fixed, o != own.end() ? o->second : 0);
    }
  }
  std::string names;
  for (const auto &[name, r] : ranges)
    names += " " + name + "=" + std::to_string(r.min) +
             (r.max > r.min ? "-" + std::to_string(r.max) : std::string()) +
             (r.fixed < r.min ? "(guest " + std::to_string(r.fixed) + ")" : std::string());
  std::printf("fault sweep (%s): calls of %d clean runs:%s\n", mode.c_str(), kCleanRuns,
              names.c_str());
  for (const std::string &name : must_call) {
    INFO("every clean run calls " << name);
    CHECK((ranges.contains(name) && ranges[name].min >= 1));
  }

  Totals t;
  uint64_t fixed_calls = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const auto &[name, r] : ranges) {
    // The base rule fails every call of its name already.
    if (!base_rule.empty() && base_rule.starts_with(name + ":")) continue;
    fixed_calls += r.fixed;
    for (uint64_t n = 1; n <= r.max; ++n) {
      const bool fixed = n <= r.fixed;
      (fixed ? t.fixed_positions : t.timing_positions)++;
      bool fired = false;
      for (int i = 0; i < (fixed ? kFixedTries : kTimingTries) && !fired; ++i)
        fired = injected_run(workload, async, base_rule, failure, name, n, *base, t);
      (fixed ? t.fixed_fired : t.timing_fired) += fired;
      INFO(name << ":" << n);
      // Every call the guest's own thread made in every clean run is failed once.
      if (fixed) CHECK(fired);
    }
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  std::printf(
      "fault sweep (%s): %zu names, %llu calls the guest made in every clean run each failed "
      "once, %llu of %llu made by some runs or other threads failed too; %llu runs, %llu told the "
      "guest, %llu completed, %lld ms\n",
      mode.c_str(), ranges.size(), static_cast<unsigned long long>(t.fixed_fired),
      static_cast<unsigned long long>(t.timing_fired),
      static_cast<unsigned long long>(t.timing_positions), static_cast<unsigned long long>(t.runs),
      static_cast<unsigned long long>(t.told), static_cast<unsigned long long>(t.completed),
      static_cast<long long>(ms));
  CHECK(t.fixed_positions == fixed_calls);
  CHECK(t.fixed_fired == fixed_calls);
}

}  // namespace rvgl::test::sweep
