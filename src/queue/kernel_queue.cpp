#include "queue/kernel_queue.h"

#include <algorithm>
#include <array>
#include <cerrno>

#include "util/small_buffer.h"

namespace rvgl {

namespace {

// Errors the kernel gives a failed job's fence (timeout, cancelled by a reset or a guilty context,
// device gone, uncorrectable memory error, killed by the timeout's soft recovery:
// amdgpu_ring_soft_recovery() sets -ENODATA). Anything else from WAIT_CS is a failure of the
// query itself and says nothing about the job.
bool is_job_error(int r) {
  return r == -ETIME || r == -ECANCELED || r == -ENODEV || r == -EHWPOISON || r == -ENODATA;
}

// A WAIT_CS poll that answered nothing about the job: neither done (0), nor not yet signalled
// (-EBUSY, which only a job not asked about yet could give), nor the job's own error.
bool query_failed(int r) {
  return r != 0 && r != -EBUSY && !is_job_error(r);
}

int32_t kernel_priority(uint32_t p) {
  switch (p) {
    case RVGL_PRIORITY_LOW:
      return AMDGPU_CTX_PRIORITY_LOW;
    case RVGL_PRIORITY_HIGH:
      return AMDGPU_CTX_PRIORITY_HIGH;
    default:
      return AMDGPU_CTX_PRIORITY_NORMAL;
  }
}

template <class T>
drm_amdgpu_cs_chunk chunk(uint32_t id, const T *data, size_t count) {
  drm_amdgpu_cs_chunk c{};
  c.chunk_id = id;
  c.length_dw = static_cast<uint32_t>(count * sizeof(T) / 4);
  c.chunk_data = reinterpret_cast<uintptr_t>(data);
  return c;
}

}  // namespace

uint32_t KernelQueue::hw_ip() const {
  return ip_ == RVGL_IP_SDMA ? AMDGPU_HW_IP_DMA : AMDGPU_HW_IP_COMPUTE;
}

int KernelQueue::create(std::shared_ptr<AmdgpuDevice> dev, uint32_t ip, uint32_t priority,
                        std::unique_ptr<KernelQueue> *out) {
  std::unique_ptr<KernelQueue> q(new KernelQueue(dev, ip));
  int err;
  q->timeline_ = SyncTimeline::create(dev, &err);
  if (!q->timeline_) return err;
  if ((err = dev->ctx_create(kernel_priority(priority), &q->ctx_id_))) return err;
  q->has_ctx_ = true;
  // Optional: without it a completion is only seen through the timeline.
  q->user_fence_ = UserFence::create(dev, &err);
  *out = std::move(q);
  return 0;
}

KernelQueue::~KernelQueue() {
  // The kernel keeps already-submitted jobs alive; the timeline (shared with pending fences)
  // still gets signalled when they finish.
  if (has_ctx_) dev_->ctx_free(ctx_id_);
}

int KernelQueue::submit(std::span<const rvgl_ib> ibs, std::span<const TimelinePoint> waits,
                        uint32_t bo_list, uint64_t *seq) {
  if (status().lost) return -ECANCELED;
  const uint32_t ip = hw_ip();
  // One CS, built on the stack for the common shape (a few IBs and waits).
  constexpr size_t kInline = 8;
  SmallBuffer<drm_amdgpu_cs_chunk_ib, kInline> ib_data(ibs.size());
  SmallBuffer<drm_amdgpu_cs_chunk_syncobj, kInline> wait_data(waits.size());
  for (size_t i = 0; i < ibs.size(); ++i) {
    ib_data[i] = {};
    ib_data[i].va_start = ibs[i].va;
    ib_data[i].ib_bytes = ibs[i].size;
    ib_data[i].ip_type = ip;
  }
  for (size_t i = 0; i < waits.size(); ++i)
    wait_data[i] = {waits[i].syncobj, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, waits[i].point};
  const uint64_t next = last_seq_.load(std::memory_order_relaxed) + 1;
  // The timeline point is what the completion engine waits on from its own DRM file (a CS
  // sequence number can only be waited on through the submitting file).
  drm_amdgpu_cs_chunk_syncobj signal{timeline_->handle(), 0, next};

  drm_amdgpu_cs_chunk_fence fence{};
  if (user_fence_) fence = {user_fence_->handle(), UserFence::kOffset};

  // A chunk per IB, then the waits, the signal and the user fence.
  SmallBuffer<drm_amdgpu_cs_chunk, kInline + 3> chunks(ibs.size() + 3);
  size_t n = 0;
  for (size_t i = 0; i < ibs.size(); ++i)
    chunks[n++] = chunk(AMDGPU_CHUNK_ID_IB, &ib_data[i], 1);
  if (!waits.empty())
    chunks[n++] = chunk(AMDGPU_CHUNK_ID_SYNCOBJ_TIMELINE_WAIT, wait_data.data(), waits.size());
  chunks[n++] = chunk(AMDGPU_CHUNK_ID_SYNCOBJ_TIMELINE_SIGNAL, &signal, 1);
  if (user_fence_) chunks[n++] = chunk(AMDGPU_CHUNK_ID_FENCE, &fence, 1);

  uint64_t handle;
  // Set before the kernel may run the job, cleared once last_seq_ counts it (or it was refused):
  // the health owner reads both after a fault to tell whose it may be. A plain store: the job
  // reaches the GPU, and its fault the fault cache, through the kernel's locks (or the ioctl's
  // own barrier), which order this store before them.
  submitting_.store(true, std::memory_order_release);
  struct Submitted {
    std::atomic<bool> &flag;
    ~Submitted() { flag.store(false, std::memory_order_release); }
  } submitted{submitting_};
  if (int err = dev_->cs_submit(ctx_id_, bo_list, {chunks.data(), n}, &handle)) return err;
  {
    std::lock_guard lk(recent_mu_);
    recent_.push(next, handle);
  }
  recorded_.notify_all();
  last_seq_.store(next, std::memory_order_release);
  *seq = next;
  return 0;
}

uint64_t KernelQueue::newest_finished(uint64_t floor) const {
  // Nothing at or after `floor` was submitted (the engine asks for an idle queue's next point):
  // no need to read the page, a cache line of its own that the GPU writes.
  if (!user_fence_ || floor > last_submitted()) return 0;
  const uint64_t written = user_fence_->read();
  if (!written) return 0;
  std::lock_guard lk(recent_mu_);
  // Newest first: at a fence the newest submission is usually the one done.
  for (size_t i = 0; i < recent_.size() && recent_.newest(i).first >= floor; ++i)
    if (recent_.newest(i).second <= written) return recent_.newest(i).first;
  return 0;
}

uint64_t KernelQueue::finished_point() const {
  return newest_finished(0);
}

bool KernelQueue::finished(uint64_t seq) const {
  // A job at or after `seq` that finished implies `seq` did (one ring, in order).
  return newest_finished(seq) != 0;
}

bool KernelQueue::idle() const {
  const uint64_t last = last_submitted();
  return last == 0 || timeline_->known_reached() >= last || finished(last);
}

int KernelQueue::ctx_flags(uint64_t *flags) const {
  *flags = 0;
  return dev_->ctx_query_state2(ctx_id_, flags);
}

bool KernelQueue::knows_job(uint64_t seq) const {
  std::lock_guard lk(recent_mu_);
  for (size_t i = 0; i < recent_.size() && recent_.newest(i).first >= seq; ++i)
    if (recent_.newest(i).first == seq) return true;
  return false;
}

int KernelQueue::job_error(uint64_t seq, uint64_t *job, bool *unread, bool *shared) const {
  *job = 0;
  *unread = false;
  *shared = false;
  uint64_t handle = 0;
  {
    std::unique_lock lk(recent_mu_);
    // The GPU reached `seq` before submit() recorded its job: the CS returned and the job ran
    // (and may have failed) while the VMM's thread had yet to record its kernel fence, which it
    // does next, taking no other lock first: the record is waited for, briefly, so that the
    // look classifies this job (and its fences retire after that, as any failed job's do). The
    // job is the one submission not recorded (the VMM's thread submits one at a time). If the
    // VMM's thread is held off longer: a user fence past every recorded job says it ran to its
    // end; otherwise its error cannot be asked yet, and the older job's answer is not its (a
    // fault that failed it would pass for clean, or for a cancellation of a guilty context), so
    // the look is made again. Point 0 is no job (a queue looked at before it submitted anything).
    auto unrecorded = [&] { return seq && (recent_.empty() || recent_.newest(0).first < seq); };
    if (unrecorded()) recorded_.wait_for(lk, kRecordWait, [&] { return !unrecorded(); });
    if (unrecorded()) {
      const uint64_t recorded = recent_.empty() ? 0 : recent_.newest(0).second;
      *unread = !user_fence_ || user_fence_->read() <= recorded;
      return 0;
    }
    for (size_t i = 0; i < recent_.size(); ++i)
      if (recent_.newest(i).first <= seq) {
        std::tie(*job, handle) = recent_.newest(i);
        break;
      }
  }
  if (!handle) return 0;
  const int r = dev_->wait_cs(ctx_id_, hw_ip(), 0, handle, 0);
  if (is_job_error(r)) {
    if (const int err = context_error()) {
      *shared = true;
      return err;
    }
    return r;
  }
  *unread = query_failed(r);
  return 0;
}

int KernelQueue::context_error() const {
  // Handle 0 is older than any job (the kernel numbers a context's jobs from 1):
  // amdgpu_ctx_get_fence() has no fence for it and answers "signalled", so only the context's
  // own error (amdgpu_ctx_get_entity(), asked first) can come back.
  const int r = dev_->wait_cs(ctx_id_, hw_ip(), 0, 0, 0);
  return is_job_error(r) ? r : 0;
}

uint64_t KernelQueue::failed_by_user_fence(
    int err, std::span<const std::pair<uint64_t, uint64_t>> jobs) const {
  if (jobs.empty()) return 0;
  if (!user_fence_) return jobs.front().first;
  const uint64_t written = user_fence_->read();
  if (err == -ENODATA) {
    for (auto it = jobs.rbegin(); it != jobs.rend(); ++it)
      if (it->second <= written) return it->first;
    return 0;
  }
  for (const auto &[seq, handle] : jobs)
    if (handle > written) return seq;
  return 0;
}

int KernelQueue::first_error_between(uint64_t after, uint64_t upto, uint64_t *failed, bool *unread,
                                     bool *shared) const {
  *failed = 0;
  *unread = false;
  *shared = false;
  const uint64_t newest = last_submitted();
  if (newest > kKernelFences) after = std::max(after, newest - kKernelFences);
  if (upto <= after) return 0;
  std::array<std::pair<uint64_t, uint64_t>, kKernelFences> jobs;
  size_t n = 0;
  {
    std::lock_guard lk(recent_mu_);
    for (size_t i = 0; i < recent_.size(); ++i)
      if (const auto &[seq, handle] = recent_.oldest(i);
          seq > after && seq <= upto && n < kKernelFences)
        jobs[n++] = {seq, handle};
  }
  for (size_t i = 0; i < n; ++i) {
    const int r = dev_->wait_cs(ctx_id_, hw_ip(), 0, jobs[i].second, 0);
    if (is_job_error(r)) {
      if (const int err = context_error()) {
        // Every job answers it: this one's answer says nothing of this job.
        *shared = true;
        *failed = failed_by_user_fence(err, {jobs.data(), n});
        return *failed ? err : 0;
      }
      *failed = jobs[i].first;
      return r;
    }
    if (query_failed(r)) {
      *unread = true;
      return 0;
    }
  }
  return 0;
}

void KernelQueue::fill_state(rvgl_rsp_queue_state *rsp) const {
  // Completed: what the completion engine has seen (no ioctl on the VMM's thread).
  status_.fill(rsp, last_submitted(), timeline_->known_reached());
}

}  // namespace rvgl
