// One hardware ring of one device: runs the jobs submitted to it, in order per context, each once
// its dependencies have signaled (the drm scheduler's job, folded into one thread per ring).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "config/device_profile.h"
#include "exec/job.h"
#include "exec/worker_thread.h"
#include "util/clock.h"

namespace rvgl::emu {

// Device-wide reset bookkeeping (what QUERY_STATE2 and VRAM_LOST_COUNTER compare against).
struct ResetCounters {
  std::atomic<uint32_t> gpu_resets{0};
  std::atomic<uint32_t> vram_lost{0};
  // Recoveries whose count waits for the next QUERY_STATE (RVGL_EMU_RECOVERY_COUNT_AT_QUERY).
  std::atomic<uint32_t> counts_at_query{0};
  // While a full reset runs (RVGL_EMU_FULL_RESET_US), when it is over: steady-clock ns.
  std::atomic<int64_t> full_reset_over_ns{0};
};

class RingWorker {
 public:
  RingWorker(uint32_t ip, const DeviceProfile &profile, ResetCounters &resets)
      : ip_(ip), profile_(profile), resets_(resets) {}
  ~RingWorker() { stop(); }
  RingWorker(const RingWorker &) = delete;
  RingWorker &operator=(const RingWorker &) = delete;

  // Queues a job (the thread starts on the first one).
  void submit(std::unique_ptr<Job> job);
  // Cancels what has not started, lets the running job finish, joins.
  void stop();
  // In a forked child: the thread is gone; queued jobs are cancelled.
  void forget_after_fork();

  // drm_sched_entity_is_idle() for `ctx`'s entity on this ring (FenceDomain lock held): every job
  // of it has left the entity for the hardware ring. The scheduler pushes a job to the ring once
  // its dependencies have signaled and the ring has room: amdgpu_sched_hw_submission's default of 2
  // jobs per ring, the running one and the scheduler's next pick (find_ready_locked). So the entity
  // is idle with no job of ctx queued, or with one that is that next pick while a job runs.
  bool entity_idle_locked(const Context &ctx);
  // Registers `w` on what can make entity_idle_locked(ctx) true: a job leaving the queue for the
  // ring (the scheduler's job_scheduled wait queue) and the dependencies of ctx's oldest job.
  void subscribe_entity_locked(Waiter &w, const Context &ctx);

 private:
  void loop();
  Job *find_ready_locked();
  void subscribe_blockers_locked(Waiter &w);
  void run(Job &job);
  // Sleeps until d, or until stop.
  void stall_until(Deadline d);
  // A full reset runs until `over`: amdgpu_device_gpu_recover() stops every ring's scheduler,
  // so no ring starts a job before then (wait_out_full_reset()).
  void begin_full_reset(Deadline over);
  void wait_out_full_reset();
  // The timeout handler's full reset for a job that hung or failed on the ring
  // (amdgpu_device_gpu_recover()): its context marked guilty, the device's reset counted, the
  // job's fence signalled -ETIME once the reset is over.
  void recover_by_full_reset(Job &job);
  void finish(Job &job, int error);
  // A job that ran and failed: the next pick is popped first where the kernel would have had it
  // on the ring already (pop_behind_locked), then the job ends with `error`.
  void fail(Job &job, int error);
  // drm_sched_entity_pop_job() for `job` (FenceDomain lock held): its prepare_job error, and the
  // job as its entity's last_scheduled. Once per job.
  void pop_locked(Job &job);
  void pop_behind_locked(const Context &ctx);
  void cancel_queued();
  std::unique_ptr<Job> take_next_on_ring(const Context &ctx);

  const uint32_t ip_;  // which decoder runs its IBs
  const DeviceProfile &profile_;
  ResetCounters &resets_;
  std::deque<std::unique_ptr<Job>> queue_;  // guarded by FenceDomain::mutex()
  // Contexts already looked at by find_ready_locked / subscribe_blockers_locked (domain lock):
  // kept so a pick allocates nothing.
  std::vector<const Context *> seen_;
  WaitQueue wake_;  // a job queued, or stop
  // drm_gpu_scheduler.job_scheduled: woken when a job leaves queue_ for the ring (domain lock).
  WaitQueue scheduled_;
  bool busy_ = false;  // a job taken off queue_ runs (domain lock)
  std::atomic<bool> stop_{false};
  WorkerThread thread_;
};

}  // namespace rvgl::emu
