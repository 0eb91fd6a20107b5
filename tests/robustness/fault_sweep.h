// The fault-injection sweep of the robustness suite (issue 7): a scripted guest workload is run
// clean to learn which kernel calls it makes (the emulator counts every thread's calls per
// RVGL_EMU_FAIL name, and the guest's own thread's apart), then once per call with that call
// failing with EIO. Every run must end with the work done or the guest told (an errno, an event
// or a lost queue), with the kernel's errno as it was; every fence the VMM made must retire,
// error or not, and only once; and the kernel and the host are left with nothing of ours. The
// workloads (test_fault_sweep*.cpp) say what a run does; this file is what every run is held to.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "robustness/robust_support.h"
#include "support/open_fds.h"

namespace rvgl::test::sweep {

struct FenceMade {
  uint32_t ring;
  uint64_t id;
  uint64_t point;  // the work's seq when the fence was made (0: none), for the failure message
};

struct Outcome {
  bool data_ok = false;
  std::vector<std::string> told;  // each way the guest or the VMM was told, with its errno
  std::vector<int32_t> errnos;    // every non-zero result the guest or the VMM got
  // Fences made that had not retired by the deadline, and any delivered twice or never made.
  std::vector<std::string> unretired;
  // Guest pages the host still held once the VMM's detach of their blob had returned.
  std::vector<std::string> in_use;
  std::string harness_error;  // the test's own failure: never counts as "told"
};

// What holds a guest's pages on the host besides the VMM's own mapping: the kernel's userptr
// objects and udmabufs (the emulator counts them for every file), and mappings of the guest RAM
// file (an alias the import made; the emulated udmabuf's pin of the pages is one too).
struct PageHolders {
  uint64_t userptrs = 0, udmabufs = 0;
  size_t file_maps = 0;
  static PageHolders now(int guest_ram_fd);
  std::string differs(const PageHolders &before) const;  // "" when as before
};

// What every workload's guest does to report: a result it got, its fences, its queues' state and
// its events.
class SweepGuest {
 public:
  SweepGuest(bool async, uint32_t ctx_id) : async_(async), ctx_id_(ctx_id) {}
  virtual ~SweepGuest() = default;

  Outcome run();

 protected:
  virtual void run_guest() = 0;
  // A guest-visible result: non-zero means the guest got an errno.
  bool failed(const char *what, int32_t r);
  // The guest saw something go wrong that carries an errno (a lost queue's error).
  void told(std::string what, int32_t err);
  // Makes the fences (each failure is told), waits for them all and for the health owner to have
  // classified the completions, and checks that exactly the fences made were delivered, each once.
  // False when any was refused or did not retire.
  bool fences(ContextHarness &h, const std::vector<FenceMade> &want);
  // QUEUE_STATE of each queue (0: none): false when one is lost or the request failed.
  bool queues_ok(ContextHarness &h, const std::vector<uint32_t> &queues);
  // The events the host posted: each one is something the guest was told.
  bool no_events(ContextHarness &h);
  // After the VMM's detaches: nothing holds the guest's pages that did not before the blobs
  // were made (`before`), whatever failed on the way.
  void pages_released(const PageHolders &before, int guest_ram_fd, const char *after);
  // Creates the context (`ctx_id_`, the run's delivery mode) and its shared page; nullptr when
  // the create failed (told). *page_ok: the shared page was made.
  ContextHarness *open_context(std::optional<ContextHarness> &ctx, bool *page_ok);
  // A CPU-visible buffer as a guest makes one: BO_CREATE, then the VMM's blob claim and map.
  std::optional<ContextHarness::HostBuffer> mapped_bo(ContextHarness &h, uint64_t size,
                                                      uint32_t domain = RVGL_DOMAIN_GTT);

  bool async_;
  uint32_t ctx_id_;
  Outcome o_;

 private:
  uint64_t blob_id_ = 0;
};

// What a run leaves behind once its context is gone, and the checks that a run left nothing more.
struct Baseline {
  rvgl_emu_counters kernel = emu_counters();
  std::set<int> fds = open_fds();
};
// A clean run of a sweep (`what` names it): done, nothing told, every fence retired; the
// baseline taken after the first run (and taken again when a descriptor it counted has closed
// since), and the run left nothing more. `before_runs`: the kernel's objects before any run.
void check_clean_run(const Outcome &clean, int run, const std::string &what,
                     const rvgl_emu_counters &before_runs, std::optional<Baseline> &base);
// Waits for a run's leftovers to go (a job the kernel still runs holds its context a while);
// false, with what is left as the test's info, when they do not.
bool back_to(const Baseline &base);
std::string joined(const std::vector<std::string> &v);

// Builds a guest for one run (async: fence callbacks; otherwise poll mode).
using Workload = std::function<std::unique_ptr<SweepGuest>(bool async)>;

// How a run's injected call fails.
enum class Failure {
  kOnce,       // that call alone (NAME:N:EIO)
  kFromThenOn  // that call and every later one of its name (NAME:N+:EIO): a kernel that keeps
               // refusing, so the host's cleanup and retries meet the error too
};

// The calls a workload exists to sweep: every clean run must make each at least once, or the
// sweep would pass without touching them (a cost model that picks another import, a feature the
// context left out).
using MustCall = std::vector<std::string>;

// The clean runs, then a run per call of each name with that call failing; `variant` names the
// test case's setting and `base_rule` (RVGL_EMU_FAIL) holds in every run.
void sweep(const Workload &workload, const MustCall &must_call, bool async,
           const std::string &variant = "", const std::string &base_rule = "",
           Failure failure = Failure::kOnce);

}  // namespace rvgl::test::sweep
