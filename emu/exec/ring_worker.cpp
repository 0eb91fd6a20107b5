#include "exec/ring_worker.h"

#include <pthread.h>

#include <amdgpu_drm.h>

#include <algorithm>
#include <cerrno>
#include <thread>
#include <vector>

#include "core/counters.h"
#include "core/runtime_knobs.h"
#include "exec/exec_context.h"
#include "exec/pm4_packets.h"
#include "exec/sdma_packets.h"

namespace rvgl::emu {

namespace {

// The interrupt handler runs RVGL_EMU_IRQ_LATENCY_US after the job's end, the knob read again
// while it waits (every millisecond at least): a test holds an interrupt back with a long latency
// and lets it go by lowering the knob, instead of racing a fixed window.
void wait_out_irq_latency(const RuntimeKnobs &k) {
  const Deadline ended = SteadyClock::now();
  for (;;) {
    const Deadline due = ended + std::chrono::microseconds(k.irq_latency_us.load());
    const Deadline now = SteadyClock::now();
    if (now >= due) return;
    std::this_thread::sleep_for(
        std::min<SteadyClock::duration>(due - now, std::chrono::milliseconds(1)));
  }
}

}  // namespace

void RingWorker::submit(std::unique_ptr<Job> job) {
  {
    std::lock_guard lk(FenceDomain::mutex());
    queue_.push_back(std::move(job));
    wake_.wake_all_locked();
  }
  if (!thread_.running() && !stop_.load()) thread_.start([this] { loop(); });
}

void RingWorker::stop() {
  {
    std::lock_guard lk(FenceDomain::mutex());
    stop_.store(true);
    wake_.wake_all_locked();
  }
  thread_.join();
  cancel_queued();
  stop_.store(false);
}

void RingWorker::forget_after_fork() {
  thread_.forget();
  cancel_queued();
}

void RingWorker::cancel_queued() {
  std::deque<std::unique_ptr<Job>> dropped;
  {
    std::lock_guard lk(FenceDomain::mutex());
    dropped.swap(queue_);
    scheduled_.wake_all_locked();
  }
  for (auto &j : dropped)
    finish(*j, -ECANCELED);
}

// The oldest job whose context has nothing older queued and whose dependencies have signaled.
Job *RingWorker::find_ready_locked() {
  std::vector<const Context *> &blocked = seen_;
  blocked.clear();
  for (auto &j : queue_) {
    const Context *c = j->ctx.get();
    if (std::find(blocked.begin(), blocked.end(), c) != blocked.end()) continue;
    blocked.push_back(c);
    bool ready = true;
    for (const auto &d : j->deps) {
      if (d.fence && !d.fence->is_signaled_locked()) ready = false;
      if (d.syncobj && !d.syncobj->signaled_locked(d.point)) ready = false;
      if (!ready) break;
    }
    if (ready) return j.get();
  }
  return nullptr;
}

// What find_ready_locked() is waiting for: this ring's queue (a new job, stop) and the
// unsatisfied dependencies of each context's oldest job.
void RingWorker::subscribe_blockers_locked(Waiter &w) {
  w.subscribe_locked(wake_, nullptr);  // the worker outlives its own thread
  std::vector<const Context *> &seen = seen_;
  seen.clear();
  for (auto &j : queue_) {
    const Context *c = j->ctx.get();
    if (std::find(seen.begin(), seen.end(), c) != seen.end()) continue;
    seen.push_back(c);
    for (const auto &d : j->deps) {
      if (d.fence) Fence::subscribe_locked(w, d.fence);
      if (d.syncobj && !d.syncobj->signaled_locked(d.point))
        Syncobj::subscribe_locked(w, d.syncobj, d.point);
    }
  }
}

bool RingWorker::entity_idle_locked(const Context &ctx) {
  const Job *first = nullptr;
  size_t queued = 0;
  for (const auto &j : queue_) {
    if (j->ctx.get() != &ctx) continue;
    if (!first) first = j.get();
    if (++queued > 1) return false;
  }
  return queued == 0 || (busy_ && find_ready_locked() == first);
}

void RingWorker::subscribe_entity_locked(Waiter &w, const Context &ctx) {
  w.subscribe_locked(scheduled_, nullptr);  // the worker outlives every open file
  for (const auto &j : queue_) {
    if (j->ctx.get() != &ctx) continue;
    for (const auto &d : j->deps) {
      if (d.fence) Fence::subscribe_locked(w, d.fence);
      if (d.syncobj && !d.syncobj->signaled_locked(d.point))
        Syncobj::subscribe_locked(w, d.syncobj, d.point);
    }
    return;  // only the oldest can be next
  }
}

void RingWorker::loop() {
  pthread_setname_np(pthread_self(), "emu-ring");
  std::unique_lock lk(FenceDomain::mutex());
  while (true) {
    Job *pick = nullptr;
    FenceDomain::wait_until(
        lk, never(),
        [&] {
          if (stop_.load()) return true;
          pick = find_ready_locked();
          return pick != nullptr;
        },
        [&](Waiter &w) { subscribe_blockers_locked(w); });
    if (stop_.load()) return;
    auto it = std::find_if(queue_.begin(), queue_.end(), [&](auto &j) { return j.get() == pick; });
    std::unique_ptr<Job> job = std::move(*it);
    queue_.erase(it);
    pop_locked(*job);
    busy_ = true;
    scheduled_.wake_all_locked();  // drm_sched_run_job_work(): wake_up(&sched->job_scheduled)
    lk.unlock();
    run(*job);
    job.reset();
    lk.lock();
    busy_ = false;
  }
}

// With amdgpu_sched_hw_submission's default of 2 jobs on a ring, the ring holds at most one job
// behind the running one: the scheduler's next pick. It is taken off if it is `ctx`'s.
std::unique_ptr<Job> RingWorker::take_next_on_ring(const Context &ctx) {
  std::lock_guard lk(FenceDomain::mutex());
  Job *next = find_ready_locked();
  if (!next || next->ctx.get() != &ctx) return nullptr;
  auto it = std::find_if(queue_.begin(), queue_.end(), [&](auto &j) { return j.get() == next; });
  std::unique_ptr<Job> taken = std::move(*it);
  queue_.erase(it);
  pop_locked(*taken);
  scheduled_.wake_all_locked();
  return taken;
}

void RingWorker::pop_locked(Job &job) {
  if (job.popped) return;  // already, behind a job that failed (pop_behind_locked)
  // amdgpu_job_prepare_job() runs as the job's dependencies are taken, before the job becomes the
  // entity's last_scheduled: it sees the error of the one popped before it.
  const EntityKey key{job.ip, 0, job.ring};
  job.popped = true;
  job.prepare_error = job.ctx->entity_error_locked(key);
  job.ctx->set_last_scheduled_locked(key, job.fence);
}

void RingWorker::pop_behind_locked(const Context &ctx) {
  // With room for 2 jobs on the ring (amdgpu_sched_hw_submission), the scheduler popped its next
  // pick while the failing job still ran: if that is the same entity's next job, it was prepared
  // before the failure, and it is the entity's last_scheduled now, not the failed job.
  Job *next = find_ready_locked();
  if (next && next->ctx.get() == &ctx) pop_locked(*next);
}

void RingWorker::fail(Job &job, int error) {
  {
    std::lock_guard lk(FenceDomain::mutex());
    pop_behind_locked(*job.ctx);
  }
  finish(job, error);
}

void RingWorker::finish(Job &job, int error) {
  if (error)
    counters().jobs_failed.fetch_add(1, std::memory_order_relaxed);
  else
    counters().jobs_completed.fetch_add(1, std::memory_order_relaxed);
  // References go before the signal: a waiter that then frees the objects sees them gone.
  job.bos.reset();
  job.user_fence_bo.reset();
  job.vm_ticket.end();  // what was unmapped behind it may go (the kernel's deferred PT clear)
  job.vm.reset();
  job.ctx.reset();
  job.deps.clear();
  job.fence->signal(error);
}

void RingWorker::stall_until(Deadline d) {
  std::unique_lock lk(FenceDomain::mutex());
  FenceDomain::wait_until(
      lk, d, [&] { return stop_.load(); }, [&](Waiter &w) { w.subscribe_locked(wake_, nullptr); });
}

void RingWorker::begin_full_reset(Deadline over) {
  const int64_t over_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(over.time_since_epoch()).count();
  // Two rings' hangs at once: the later end stands.
  int64_t prev = resets_.full_reset_over_ns.load();
  while (prev < over_ns && !resets_.full_reset_over_ns.compare_exchange_weak(prev, over_ns)) {
  }
}

void RingWorker::recover_by_full_reset(Job &job) {
  // amdgpu_device_gpu_recover(): the context is marked guilty (drm_sched_increase_karma()) and
  // the reset counted before the ASIC reset; the job's fence signals once it is over, which takes
  // RVGL_EMU_FULL_RESET_US (no ring starts a job meanwhile).
  RuntimeKnobs &k = knobs();
  job.ctx->guilty = true;
  const uint64_t reset_us = k.full_reset_us.load();
  const Deadline over = SteadyClock::now() + std::chrono::microseconds(reset_us);
  if (reset_us) begin_full_reset(over);  // before the count: whoever sees it finds rings stopped
  resets_.gpu_resets.fetch_add(1);
  counters().gpu_resets.fetch_add(1, std::memory_order_relaxed);
  if (reset_us) stall_until(over);
  fail(job, -ETIME);
}

void RingWorker::wait_out_full_reset() {
  const int64_t over_ns = resets_.full_reset_over_ns.load(std::memory_order_relaxed);
  if (over_ns == 0) return;  // no reset ever took time: no clock read per job
  const Deadline over{std::chrono::nanoseconds(over_ns)};
  if (over > SteadyClock::now()) stall_until(over);
}

void RingWorker::run(Job &job) {
  RuntimeKnobs &k = knobs();
  Context &ctx = *job.ctx;
  wait_out_full_reset();
  // drm_sched_entity_pop_job: work of a guilty context is cancelled, not run; so is work of a
  // context that predates a VRAM loss (amdgpu_job_run).
  if (ctx.guilty.load() || ctx.vram_lost_counter_at_create() != resets_.vram_lost.load()) {
    finish(job, -ECANCELED);
    return;
  }
  // drm_sched_run_job_work(): a job whose prepare_job set an error is not run; it signals with it.
  if (job.prepare_error) {
    finish(job, job.prepare_error);
    return;
  }
  if (const uint64_t us = k.job_latency_us.load())
    std::this_thread::sleep_for(std::chrono::microseconds(us));

  const Deadline lockup = deadline_after_ms(k.lockup_timeout_ms.load());
  // amdgpu_ib_schedule(): the CP writes the user fence after the job's IBs (when the ring got past
  // them), then raises the end-of-pipe interrupt. Whoever reads that page may see the job done
  // before the interrupt handler has run.
  const auto end_of_job = [&](bool ring_went_on) {
    if (ring_went_on && job.user_fence_bo)
      job.user_fence_bo->backing()->write_fence(job.user_fence_offset, job.seq);
    if (k.irq_latency_us.load()) wait_out_irq_latency(k);
  };
  // The timeout handler counts a recovery that worked once the hung job's fence signalled, on
  // its own worker, which a loaded host may preempt in between (RVGL_EMU_RECOVERY_COUNT_DELAY_US).
  const auto count_recovery = [&] {
    if (const uint64_t us = k.recovery_count_delay_us.load())
      std::this_thread::sleep_for(std::chrono::microseconds(us));
    if (k.recovery_count_at_query.load())
      resets_.counts_at_query.fetch_add(1);
    else
      resets_.gpu_resets.fetch_add(1);
  };
  const uint64_t soft = k.soft_recover_job.load();
  const bool waves_hang = soft && job.ordinal == soft;
  if (waves_hang && ip_ != AMDGPU_HW_IP_DMA) {
    // amdgpu_job_timedout() tries amdgpu_ring_soft_recovery() first: the job's fence gets
    // -ENODATA, the waves of its VMID are killed, and the ring goes on past the IB, so the CP
    // writes the user fence and raises the end-of-pipe interrupt as for any job. The device's
    // reset counter moves once the fence signalled (mainline counts only a recovery that
    // worked); nothing is marked guilty and other contexts' work is not touched.
    stall_until(lockup);
    end_of_job(true);
    fail(job, -ENODATA);
    count_recovery();
    return;
  }
  const uint64_t ring_reset = k.ring_reset_job.load();
  if (ring_reset && job.ordinal == ring_reset) {
    // A hang soft recovery cannot end: amdgpu_job_timedout() then resets only this queue
    // (amdgpu_ring_reset(), Linux 6.12+, compute/GFX and SDMA alike on the emulated parts).
    // amdgpu_fence_driver_guilty_force_completion() (mainline): the job's fence gets -ETIME and
    // the fences its context still has on the ring -ECANCELED; the ring's other work is backed
    // up and re-emitted, so it runs. The job's commands are never re-emitted: its IBs have no
    // effect and its user fence is not written. The reset counter moves after the reset
    // succeeded; nothing is marked guilty (no karma), so the context's later jobs run.
    stall_until(lockup);
    std::unique_ptr<Job> behind = take_next_on_ring(ctx);
    finish(job, -ETIME);
    if (behind) finish(*behind, -ECANCELED);
    count_recovery();
    return;
  }
  // SDMA rings have no soft_recovery hook: a hang there resets the GPU.
  if ((k.hang_job.load() && job.ordinal == k.hang_job.load()) || waves_hang) {
    // The engine stops making progress; the job timeout handler resets the GPU and blames it.
    stall_until(lockup);
    recover_by_full_reset(job);
    return;
  }
  if (k.reset_job.load() && job.ordinal == k.reset_job.load()) {
    // Another engine hung and the reset took this job with it: innocent, maybe with VRAM lost.
    resets_.gpu_resets.fetch_add(1);
    if (k.reset_vram_lost.load()) resets_.vram_lost.fetch_add(1);
    counters().gpu_resets.fetch_add(1, std::memory_order_relaxed);
    fail(job, -ECANCELED);
    return;
  }

  // The accessor (and the pages it resolved) is gone before the fence signals, so whoever waited
  // sees every reference the job held already dropped.
  ExecStatus st = ExecStatus::Ok;
  VmFault fault;
  bool faulted = false;
  // The fault's own interrupt is handled while the job goes on (the kernel's default lets it
  // run to its end, a long time after). A latency set for the end-of-pipe interrupt
  // (RVGL_EMU_IRQ_LATENCY_US, which tests use to hold it) delays the fault's entry too: it is
  // handled with the job's end then, before it in the IH ring's order.
  const bool irq_at_once = k.irq_latency_us.load() == 0;
  {
    GpuMemory mem(*job.vm, k.fault_va.load(), k.fault_len.load(),
                  fault_policy_from_knob(k.vm_fault_stop.load()), job.vm_ticket.seq(),
                  irq_at_once ? FaultRecord::kAtFault : FaultRecord::kByCaller);
    ExecContext cx{mem, profile_, lockup, stop_};
    for (const IbRange &ib : job.ibs) {
      // What the ring's IB packet carries: a 20-bit dword count (gfx_v11_0_ring_emit_ib_compute
      // ORs length_dw into the control word; the SDMA INDIRECT packet's IB_SIZE field), and for
      // SDMA an address the kernel rounds down to 32 bytes (sdma_v6_0_ring_emit_ib: "base must
      // be 32 byte aligned", lower_32_bits(gpu_addr) & 0xffffffe0). The kernel checks neither.
      const uint64_t dwords = ib.bytes / 4;
      st = ip_ == AMDGPU_HW_IP_DMA
               ? run_sdma_ib(cx, ib.va & ~uint64_t{31}, dwords & sdma::kIbSizeMask, 1)
               : run_pm4_ib(cx, ib.va, dwords & pm4::kIbSizeMask, 1);
      if (st != ExecStatus::Ok) break;
    }
    counters().bytes_copied.fetch_add(mem.bytes_copied(), std::memory_order_relaxed);
    counters().bytes_written.fetch_add(mem.bytes_written(), std::memory_order_relaxed);
    fault = mem.fault();
    faulted = mem.faulted() && !irq_at_once;  // recorded when it happened otherwise
  }
  end_of_job(st == ExecStatus::Ok);
  // A fault held with the end-of-pipe interrupt: the handler takes the IH ring in order
  // (amdgpu_ih_process), and the fault's entry precedes the job's end-of-pipe one, so the VM's
  // fault cache is filled (gmc_v10_0_process_interrupt -> amdgpu_vm_update_fault_cache) before
  // the fence signals, whether or not the job went on. Nothing is blamed for it here.
  if (faulted) job.vm->record_fault(fault);

  switch (st) {
    case ExecStatus::Ok:
      finish(job, 0);
      return;
    case ExecStatus::Fault:  // only with vm_fault_stop: the halted VM context hangs the job
      // until the scheduler's timeout handler ends it (amdgpu_job_timedout(), lockup_timeout);
      // the fault is in the cache all that time. RVGL_EMU_FAULT_HALT_MS (0: at once).
      if (const uint64_t ms = k.fault_halt_ms.load())
        stall_until(SteadyClock::now() + std::chrono::milliseconds(ms));
      [[fallthrough]];
    case ExecStatus::Illegal:
    case ExecStatus::Timeout:
      // The job never reaches its end: the scheduler's timeout handler ends it
      // (amdgpu_job_timedout(); an illegal packet's interrupt calls drm_sched_fault(), which
      // runs it at once). Soft recovery kills the VMID's waves and cannot move a CP stopped at
      // a packet, a wait or a halted VM context, and a ring with no reset hook (or whose reset
      // failed) leaves the full reset, which every context sees in its reset counter.
      // RVGL_EMU_SOFT_RECOVER_JOB and RVGL_EMU_RING_RESET_JOB give the other two endings.
      recover_by_full_reset(job);
      return;
    case ExecStatus::Aborted:
      finish(job, -ECANCELED);
      return;
  }
}

}  // namespace rvgl::emu
