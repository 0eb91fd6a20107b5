// A kernel-scheduled queue: one amdgpu context submitting to one hardware IP. Submission n
// signals point n of the queue's timeline, which is both the guest-visible seq and what ring
// fences and other queues' waits refer to.
//
// Threads: submit() on the VMM's thread only. The health fields are written by the context's
// QueueHealth (on the completion engine's thread) and read by QUEUE_STATE on the VMM's thread,
// through status_ (PublishedStatus).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <utility>

#include "amdgpu/amdgpu_device.h"
#include "queue/sync_timeline.h"
#include "queue/queue_status.h"
#include "queue/recent_jobs.h"
#include "queue/user_fence.h"
#include "rocm_virgl_protocol.h"

namespace rvgl {

struct TimelinePoint {
  uint32_t syncobj;
  uint64_t point;
};

class KernelQueue {
 public:
  // ip: RVGL_IP_*; priority: RVGL_PRIORITY_*.
  static int create(std::shared_ptr<AmdgpuDevice> dev, uint32_t ip, uint32_t priority,
                    std::unique_ptr<KernelQueue> *out);
  ~KernelQueue();

  // One CS ioctl: the IBs, waits on other timelines, and the signal of the next timeline point;
  // the resident set comes from the kernel-held BO list `bo_list` (0: none). On success *seq is
  // that point.
  int submit(std::span<const rvgl_ib> ibs, std::span<const TimelinePoint> waits, uint32_t bo_list,
             uint64_t *seq);

  const std::shared_ptr<SyncTimeline> &timeline() const { return timeline_; }
  uint64_t last_submitted() const { return last_seq_.load(std::memory_order_acquire); }
  // A submit() under way: its job may run, fail and fault before last_submitted() counts it.
  bool submitting() const { return submitting_.load(std::memory_order_acquire); }
  // Whether work submitted (or being submitted) may not have ended by `reached`.
  bool work_past(uint64_t reached) const { return submitting() || last_submitted() > reached; }
  uint32_t ip() const { return ip_; }
  // The newest recorded submission whose job the GPU has finished, read from the queue's user
  // fence page (no ioctl; user_fence.h); 0 when none is known. Only a job that ran to its end
  // shows here: a failed one may not, and its timeline point still signals.
  uint64_t finished_point() const;
  // Whether the user fence page shows submission `seq` finished: the same answer as
  // finished_point() >= seq for the newest submission, without walking back to the newest
  // finished one.
  bool finished(uint64_t seq) const;
  // Whether finished() can say yes: the queue has its user fence page.
  bool tells_finished() const { return user_fence_ != nullptr; }
  // The newest recorded submission at or after `seq` that the user fence page shows finished;
  // 0 for none (no ioctl).
  uint64_t finished_from(uint64_t seq) const { return newest_finished(seq); }
  // Whether every submitted job is known to have finished (the timeline's known point, or the
  // user fence page; no ioctl). Only then does freeing the kernel context not wait: the kernel
  // frees it once its queued jobs have gone to the ring (~KernelQueue).
  bool idle() const;

  // ---- what the kernel says (the health owner's observation; any thread, ioctls) ----
  // AMDGPU_CTX_QUERY2_FLAGS_* of the queue's kernel context in *flags: 0, or the query's -errno
  // (nothing is known then).
  int ctx_flags(uint64_t *flags) const;
  // The error of the newest submission at or below `seq` whose kernel fence is known (its seq in
  // *job, 0 if none is), 0 if it completed without one (or is not known). *unread: the kernel did
  // not answer (the query itself failed), or `seq` (not 0) is still past every recorded
  // submission after waiting kRecordWait for submit() to record it, and the user fence does not
  // show it ran to its end, so nothing is known of that job. *shared (when an error is returned):
  // it was the context's error, not that job's own (context_error()).
  int job_error(uint64_t seq, uint64_t *job, bool *unread, bool *shared) const;
  // Whether the kernel fence of submission `seq` itself is known. A point can be reached before
  // its submit() has recorded the fence (the job ran while the CS ioctl returned); job_error(seq)
  // waits for that record (see there).
  bool knows_job(uint64_t seq) const;
  // The error of the first job in (after, upto] that failed, asked of the kernel whatever its user
  // fence says (a job the timeout's soft recovery killed wrote it), and that job's seq in
  // *failed; 0 if none did. Only the newest kKernelFences submissions can answer: the kernel
  // reports older ones signalled without an error. One WAIT_CS per job asked, and one more when
  // one failed (context_error()). *unread: a query failed before an error was found, so the jobs
  // from there on are not known to be clean. *shared: the kernel answered the context's error
  // for every job, so the failed one was told apart by the user fence (failed_by_user_fence()).
  int first_error_between(uint64_t after, uint64_t upto, uint64_t *failed, bool *unread,
                          bool *shared) const;
  // Linux 6.5+ answers every WAIT_CS of a kernel context whose last job taken for the ring failed
  // with that job's error (amdgpu_ctx_get_entity() -> drm_sched_entity_error()), whichever job it
  // names, and refuses more work with it; older kernels answer each job's own. That error, or 0
  // (no such error, or an older kernel, or the query failed). One WAIT_CS.
  int context_error() const;

  // ---- published health (written by QueueHealth only) ----
  using Status = QueueStatus;
  Status status() const { return status_.get(); }
  void publish(const Status &s) { status_.publish(s); }
  // Fills state/flags/error/seqs of a QUEUE_STATE response from what was published.
  void fill_state(rvgl_rsp_queue_state *rsp) const;

 private:
  KernelQueue(std::shared_ptr<AmdgpuDevice> dev, uint32_t ip) : dev_(std::move(dev)), ip_(ip) {}
  uint32_t hw_ip() const;
  // The newest recorded submission at or after `floor` whose job the user fence page shows
  // finished; 0 for none.
  uint64_t newest_finished(uint64_t floor) const;
  // Among `jobs` ((seq, kernel handle), oldest first), the one the context's error `err` is of,
  // when every job answers it: the GPU wrote the user fence for each job it ran to its end, and
  // for a job the timeout's soft recovery killed (-ENODATA), which is then the newest written;
  // any other failed job wrote nothing, the first not written. 0 when none of `jobs` is it;
  // without a user fence, the first.
  uint64_t failed_by_user_fence(int err, std::span<const std::pair<uint64_t, uint64_t>> jobs) const;

  std::shared_ptr<AmdgpuDevice> dev_;
  uint32_t ip_;
  uint32_t ctx_id_ = 0;
  bool has_ctx_ = false;
  std::shared_ptr<SyncTimeline> timeline_;
  std::unique_ptr<UserFence> user_fence_;  // null when the kernel would not give one
  std::atomic<uint64_t> last_seq_{0};      // written by the VMM thread only
  std::atomic<bool> submitting_{false};    // likewise

  mutable std::mutex recent_mu_;  // recent_: written on submit, read by the health owner
  // Signalled when submit() has recorded a job: a health owner that saw the job's point reached
  // before that waits for the record rather than classify from an older job's answer.
  mutable std::condition_variable recorded_;
  // How long a health owner waits for submit() to record a job it saw completed: the VMM's
  // thread is between the CS ioctl's return and the record, a few instructions.
  static constexpr std::chrono::milliseconds kRecordWait{100};
  // amdgpu_sched_jobs' default: the fences a kernel context entity keeps (amdgpu_ctx_get_fence()).
  static constexpr uint64_t kKernelFences = 32;
  RecentJobs recent_;  // kernel fences of recent submissions, to tell which one failed

  PublishedStatus status_;
};

}  // namespace rvgl
