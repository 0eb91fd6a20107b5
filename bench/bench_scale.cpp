// Scale: the cost of one op (SUBMIT of a small compute IB + a context fence on its ring) when one
// context with one queue does all the work, against the same ops spread round-robin over 64
// contexts x 8 queues (and fewer rings, to show where the cost grows), each beside the same
// spread without virtualization (raw CS through as many DRM files, DirectFile), so the part of
// the growth that is the emulated kernel's own is measured in the same run; and the memory an
// idle context (with its shared page) costs the host.
#include <benchmark/benchmark.h>

#include <sys/resource.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "amd_packets.h"
#include "rvgl_emu.h"
#include "support/guarded.h"
#include "support/api_guest.h"
#include "support/clock.h"
#include "support/direct_file.h"
#include "support/proc_stats.h"
#include "support/side_sampler.h"
#include "support/stats.h"
#include "support/thread_cpu.h"
#include "support/virgl_host.h"

namespace rvgl::bench {
namespace {

constexpr uint32_t kOpsPerRep = 2048;

// kOpsPerRep ops in the order both sides use: queue-major, round-robin over `items` (guests or
// DRM files), `op(item, q)` for each.
template <class Items, class Op>
void for_each_op(Items &items, uint32_t queues, Op op) {
  uint32_t done = 0;
  while (done < kOpsPerRep)
    for (uint32_t q = 0; q < queues && done < kOpsPerRep; ++q)
      for (auto &item : items) {
        if (done == kOpsPerRep) break;
        op(*item, q);
        ++done;
      }
}

// A context with `queues` compute queues on rings 1..queues, and one small IB they all run.
class ScaleGuest {
 public:
  ScaleGuest(uint32_t ctx_id, uint32_t queues) : guest_(ctx_id, ctx_id * 1000) {
    guest_.start();
    target_ = guest_.mapped_bo(64 * 1024, RVGL_DOMAIN_GTT);
    ib_ = guest_.mapped_bo(64 * 1024, RVGL_DOMAIN_GTT);
    std::vector<uint32_t> ib;
    rvgl::packets::pm4_write_data(ib, target_.va, {ctx_id});
    std::memcpy(ib_.cpu, ib.data(), ib.size() * 4);
    ib_dwords_ = static_cast<uint32_t>(ib.size());
    for (uint32_t q = 0; q < queues; ++q)
      queues_.push_back(guest_.queue_create(RVGL_IP_COMPUTE, q + 1));
    fence_ids_.assign(queues, 0);
  }
  uint32_t queues() const { return static_cast<uint32_t>(queues_.size()); }
  void op(uint32_t q) {
    guest_.submit(queues_[q], ib_.va, ib_dwords_);
    guest_.fence(q + 1, ++fence_ids_[q]);
  }
  void wait_all(VirglHost &host) {
    for (uint32_t q = 0; q < queues(); ++q)
      if (!host.wait_fence(guest_.ctx_id(), q + 1, fence_ids_[q]))
        throw std::runtime_error("scale: fence did not retire");
  }

 private:
  ApiGuest guest_;
  ApiBuffer target_, ib_;
  uint32_t ib_dwords_ = 0;
  std::vector<uint32_t> queues_;
  std::vector<uint64_t> fence_ids_;
};

// The same ops without virtualization: `files` DRM files (native processes) of `queues` kernel
// contexts each, op q of a file through its context q on compute ring 0, as ScaleGuest's queue q
// submits (each queue is a kernel context of its own); the newest job of each context waited for
// at the end, as the guest waits for its fences.
class DirectScale {
 public:
  DirectScale(uint32_t files, uint32_t queues) : queues_(queues) {
    for (uint32_t i = 0; i < files; ++i) {
      auto f = std::make_unique<DirectFile>(queues);
      std::vector<uint32_t> ib;
      rvgl::packets::pm4_write_data(ib, f->va() + DirectFile::kBufferSize / 2, {i + 1});
      std::memcpy(f->cpu(), ib.data(), ib.size() * 4);
      ib_dwords_ = static_cast<uint32_t>(ib.size());
      files_.push_back(std::move(f));
    }
  }
  // kOpsPerRep ops in run_ops' order; records ns and emulated ioctls per op where asked.
  void run(std::vector<double> *ns_per_op, std::vector<double> *ioctls_per_op);

 private:
  uint32_t queues_;
  uint32_t ib_dwords_ = 0;
  std::vector<std::unique_ptr<DirectFile>> files_;
};

// Per op of one side's repetitions: wall time, emulated ioctls (every thread's: the VMM's, the
// completion engine's), and CPU time by thread (thread_cpu.h; empty without schedstat), so a
// difference between the sides says which thread pays it.
struct OpSamples {
  // registrations: SYNCOBJ_EVENTFD ioctls; signals: registrations that fired (the emulated GPU's
  // eventfd_signal()): what a completion on an idle ring costs beyond its CS.
  std::vector<double> ns, ioctls, switches, registrations, signals;
  CpuByThread by_thread;
};

uint64_t all_context_switches() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);  // every thread of the process
  return static_cast<uint64_t>(ru.ru_nvcsw + ru.ru_nivcsw);
}

// kOpsPerRep ops spread round-robin over every queue of every guest; returns ns per op and
// records the rest in *s.
double run_ops(VirglHost &host, std::vector<std::unique_ptr<ScaleGuest>> &guests,
               OpSamples *s = nullptr) {
  const ThreadCpu th0 = ThreadCpu::now();
  rvgl_emu_counters e0{}, e1{};
  rvgl_emu_get_counters(&e0, sizeof e0);
  const uint64_t cpu0 = process_cpu_ns(), cs0 = all_context_switches();
  const uint64_t t0 = now_ns();
  for_each_op(guests, guests[0]->queues(), [](ScaleGuest &g, uint32_t q) { g.op(q); });
  for (auto &g : guests)
    g->wait_all(host);
  const double ns = static_cast<double>(now_ns() - t0) / kOpsPerRep;
  const uint64_t cpu1 = process_cpu_ns(), cs1 = all_context_switches();
  rvgl_emu_get_counters(&e1, sizeof e1);
  const ThreadCpu th1 = ThreadCpu::now();
  if (!s) return ns;
  s->ns.push_back(ns);
  s->ioctls.push_back(static_cast<double>(e1.ioctls - e0.ioctls) / kOpsPerRep);
  s->switches.push_back(static_cast<double>(cs1 - cs0) / kOpsPerRep);
  s->registrations.push_back(
      static_cast<double>(e1.syncobj_eventfds_registered - e0.syncobj_eventfds_registered) /
      kOpsPerRep);
  s->signals.push_back(
      static_cast<double>(e1.syncobj_eventfds_signalled - e0.syncobj_eventfds_signalled) /
      kOpsPerRep);
  s->by_thread.add(th0, th1, cpu1 - cpu0, kOpsPerRep);
  return ns;
}

void DirectScale::run(std::vector<double> *ns_per_op, std::vector<double> *ioctls_per_op) {
  rvgl_emu_counters e0{}, e1{};
  rvgl_emu_get_counters(&e0, sizeof e0);
  const uint64_t t0 = now_ns();
  for_each_op(files_, queues_,
              [this](DirectFile &f, uint32_t q) { f.submit(q, 0, f.va(), ib_dwords_); });
  for (auto &f : files_)
    f->wait_all();
  const double ns = static_cast<double>(now_ns() - t0) / kOpsPerRep;
  rvgl_emu_get_counters(&e1, sizeof e1);
  if (ns_per_op) ns_per_op->push_back(ns);
  if (ioctls_per_op)
    ioctls_per_op->push_back(static_cast<double>(e1.ioctls - e0.ioctls) / kOpsPerRep);
}

std::vector<std::unique_ptr<ScaleGuest>> make_guests(uint32_t first_ctx, uint32_t n,
                                                     uint32_t queues) {
  std::vector<std::unique_ptr<ScaleGuest>> v;
  for (uint32_t i = 0; i < n; ++i)
    v.push_back(std::make_unique<ScaleGuest>(first_ctx + i, queues));
  return v;
}

void BM_ScaleOps(benchmark::State &state) {
  const auto contexts = static_cast<uint32_t>(state.range(0));
  const auto queues = static_cast<uint32_t>(state.range(1));
  VirglHost host;
  auto one = make_guests(1, 1, 1);
  auto many = make_guests(2, contexts, queues);
  DirectScale direct_one(1, 1), direct_many(contexts, queues);
  run_ops(host, one);
  run_ops(host, many);
  direct_one.run(nullptr, nullptr);
  direct_many.run(nullptr, nullptr);
  OpSamples a, b;                                    // one context, many
  std::vector<double> da, db, da_ioctls, db_ioctls;  // the same without virtualization
  uint64_t rep = 0;
  for (auto _ : state) {
    const uint64_t t0 = now_ns();
    // Alternating order, as in the efficiency runs.
    if (rep++ % 2) {
      run_ops(host, one, &a);
      run_ops(host, many, &b);
      direct_one.run(&da, &da_ioctls);
      direct_many.run(&db, &db_ioctls);
    } else {
      direct_many.run(&db, &db_ioctls);
      direct_one.run(&da, &da_ioctls);
      run_ops(host, many, &b);
      run_ops(host, one, &a);
    }
    state.SetIterationTime(static_cast<double>(now_ns() - t0) * 1e-9);
  }
  // What spreading the same ops over as many files and rings costs a native process's path
  // (the emulated kernel's own state going cold, its CS and waits), so the figure above can be
  // read against it: the share that is ours is cost_ratio / direct_cost_ratio.
  state.counters["direct_one_ns_per_op"] = median(da);
  state.counters["direct_many_ns_per_op"] = median(db);
  state.counters["direct_cost_ratio"] = median(db) / median(da);
  state.counters["direct_one_ioctls_per_op"] = median(da_ioctls);
  state.counters["direct_many_ioctls_per_op"] = median(db_ioctls);
  state.counters["cost_ratio_over_direct"] =
      (median(b.ns) / median(a.ns)) / (median(db) / median(da));
  state.counters["one_ctx_ns_per_op"] = median(a.ns);
  state.counters["many_ns_per_op"] = median(b.ns);
  state.counters["cost_ratio"] = median(b.ns) / median(a.ns);
  state.counters["one_ctx_ioctls_per_op"] = median(a.ioctls);
  state.counters["many_ioctls_per_op"] = median(b.ioctls);
  state.counters["one_ctx_switches_per_op"] = median(a.switches);
  state.counters["many_switches_per_op"] = median(b.switches);
  state.counters["one_ctx_registrations_per_op"] = median(a.registrations);
  state.counters["many_registrations_per_op"] = median(b.registrations);
  state.counters["one_ctx_eventfd_signals_per_op"] = median(a.signals);
  state.counters["many_eventfd_signals_per_op"] = median(b.signals);
  if (!a.by_thread.empty() && !b.by_thread.empty()) {
    a.by_thread.report(state, "one_ctx_", "op", true);
    b.by_thread.report(state, "many_", "op", true);
  }
  state.counters["contexts"] = contexts;
  state.counters["queues_per_context"] = queues;
}

// Issue 16's cost model: one context does op + fence + wait while `idle` other contexts (each
// with its health timer filed with the completion engine) do nothing; context switches per op,
// and the completion engine's CPU per op, must not depend on how many idle contexts there are.
void BM_IdleContextSwitches(benchmark::State &state) {
  const auto idle = static_cast<uint32_t>(state.range(0));
  VirglHost host;
  ScaleGuest active(1, 1);
  std::vector<std::unique_ptr<ApiGuest>> idlers;
  for (uint32_t i = 0; i < idle; ++i) {
    idlers.push_back(std::make_unique<ApiGuest>(100 + i, (100 + i) * 1000));
    idlers.back()->start();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // retire threads asleep
  constexpr uint32_t kOps = 256;
  auto run = [&] {
    for (uint32_t i = 0; i < kOps; ++i) {
      active.op(0);
      active.wait_all(host);
    }
  };
  run();
  std::vector<double> per_op;
  CpuByThread by_thread;
  for (auto _ : state) {
    const uint64_t cs0 = all_context_switches();
    const ThreadCpu th0 = ThreadCpu::now();
    const uint64_t cpu0 = process_cpu_ns();
    run();
    const uint64_t cpu1 = process_cpu_ns();
    const ThreadCpu th1 = ThreadCpu::now();
    per_op.push_back(static_cast<double>(all_context_switches() - cs0) / kOps);
    by_thread.add(th0, th1, cpu1 - cpu0, kOps);
  }
  state.counters["idle_contexts"] = idle;
  state.counters["context_switches_per_op"] = median(per_op);
  if (!by_thread.empty()) by_thread.report(state, "", "op", true);
}

void BM_IdleContextMemory(benchmark::State &state) {
  const auto n = static_cast<uint32_t>(state.range(0));
  VirglHost host;
  // One context first, so process-wide first-use costs (device probe, emulator tree, thread
  // pools) are not charged to the 64.
  ApiGuest warm(1, 1000);
  warm.start();
  std::vector<double> per_ctx;
  for (auto _ : state) {
    const uint64_t before = resident_bytes();
    std::vector<std::unique_ptr<ApiGuest>> idle;
    for (uint32_t i = 0; i < n; ++i) {
      idle.push_back(std::make_unique<ApiGuest>(10 + i, (10 + i) * 1000));
      idle.back()->start();
    }
    const uint64_t after = resident_bytes();
    per_ctx.push_back((static_cast<double>(after) - static_cast<double>(before)) / n);
  }
  state.counters["contexts"] = n;
  state.counters["rss_bytes_per_idle_context"] = median(per_ctx);
  state.counters["rss_KiB_per_idle_context"] = median(per_ctx) / 1024;
}

}  // namespace

BENCHMARK(guarded<BM_ScaleOps>)
    ->Name("BM_ScaleOps")
    ->ArgNames({"contexts", "queues"})
    ->Args({1, 8})
    ->Args({64, 8})
    // Where the cost per op grows: the same 64 rings as 8 x 8 or 64 x 1, then 128 and 256. Each op
    // lands on a ring idle since its last one once there are more rings than ops in flight, so
    // each completion costs the engine a wakeup share and a registration (docs/performance.md).
    ->Args({8, 8})
    ->Args({64, 1})
    ->Args({16, 8})
    ->Args({32, 8})
    ->Iterations(14)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(guarded<BM_IdleContextSwitches>)
    ->Name("BM_IdleContextSwitches")
    ->ArgName("idle_contexts")
    ->Arg(0)
    ->Arg(64)
    ->Arg(120)  // with the active one, within RVGL_MAX_CONTEXTS's default of 128
    ->Iterations(5);
BENCHMARK(guarded<BM_IdleContextMemory>)
    ->Name("BM_IdleContextMemory")
    ->Arg(64)
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace rvgl::bench
