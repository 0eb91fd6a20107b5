#include "queue/kernel_queue.h"

#include <cerrno>
#include <vector>

namespace rvgl {

namespace {

// Errors the kernel gives a failed job's fence (timeout, cancelled by a reset or a guilty context,
// device gone, uncorrectable memory error). Anything else from WAIT_CS is a failure of the query
// itself and says nothing about the job.
bool is_job_error(int r) {
  return r == -ETIME || r == -ECANCELED || r == -ENODEV || r == -EHWPOISON;
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
  *out = std::move(q);
  return 0;
}

KernelQueue::~KernelQueue() {
  // The kernel keeps already-submitted jobs alive; the timeline (shared with pending fences)
  // still gets signalled when they finish.
  if (has_ctx_) dev_->ctx_free(ctx_id_);
}

int KernelQueue::submit(std::span<const rvgl_ib> ibs, std::span<const TimelinePoint> waits,
                        std::span<const drm_amdgpu_bo_list_entry> bos, uint64_t *seq) {
  if (lost()) return -ECANCELED;
  const uint32_t ip = hw_ip();
  std::vector<drm_amdgpu_cs_chunk_ib> ib_data(ibs.size());
  for (size_t i = 0; i < ibs.size(); ++i) {
    ib_data[i] = {};
    ib_data[i].va_start = ibs[i].va;
    ib_data[i].ib_bytes = ibs[i].size;
    ib_data[i].ip_type = ip;
  }
  std::vector<drm_amdgpu_cs_chunk_syncobj> wait_data(waits.size());
  for (size_t i = 0; i < waits.size(); ++i)
    wait_data[i] = {waits[i].syncobj, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, waits[i].point};
  const uint64_t next = last_seq_ + 1;
  drm_amdgpu_cs_chunk_syncobj signal{timeline_->handle(), 0, next};
  drm_amdgpu_bo_list_in bo_list{};
  bo_list.bo_number = static_cast<uint32_t>(bos.size());
  bo_list.bo_info_size = sizeof(drm_amdgpu_bo_list_entry);
  bo_list.bo_info_ptr = reinterpret_cast<uintptr_t>(bos.data());

  std::vector<drm_amdgpu_cs_chunk> chunks;
  chunks.reserve(ibs.size() + 3);
  for (const auto &ib : ib_data)
    chunks.push_back(chunk(AMDGPU_CHUNK_ID_IB, &ib, 1));
  if (!bos.empty()) chunks.push_back(chunk(AMDGPU_CHUNK_ID_BO_HANDLES, &bo_list, 1));
  if (!wait_data.empty())
    chunks.push_back(
        chunk(AMDGPU_CHUNK_ID_SYNCOBJ_TIMELINE_WAIT, wait_data.data(), wait_data.size()));
  chunks.push_back(chunk(AMDGPU_CHUNK_ID_SYNCOBJ_TIMELINE_SIGNAL, &signal, 1));

  uint64_t handle;
  int err = dev_->cs_submit(ctx_id_, chunks, &handle);
  if (err) {
    if (err == -ECANCELED || err == -ENODEV) merge(0, true, err);
    return err;
  }
  last_seq_.store(next, std::memory_order_release);
  last_handle_.store(handle, std::memory_order_release);
  {
    std::lock_guard lk(mu_);
    recent_.emplace_back(next, handle);
    if (recent_.size() > kRecent) recent_.pop_front();
  }
  *seq = next;
  return 0;
}

KernelQueue::Observation KernelQueue::observe() const {
  Observation o;
  dev_->ctx_query_state2(ctx_id_, &o.ctx_flags);
  if (const uint64_t h = last_handle_.load(std::memory_order_acquire)) {
    // The job's own error (a VM fault, a timeout, a cancellation) when it failed.
    const int r = dev_->wait_cs(ctx_id_, hw_ip(), 0, h, 0);
    if (is_job_error(r)) o.job_error = r;
  }
  return o;
}

uint32_t KernelQueue::merge(uint32_t flags, bool lost, int error) {
  std::lock_guard lk(mu_);
  const uint32_t fresh = flags & ~flags_;
  flags_ |= flags;
  if (lost && !lost_) {
    lost_ = true;
    first_error_ = error ? error : -ECANCELED;
  }
  return fresh;
}

uint64_t KernelQueue::first_failed_seq() const {
  std::deque<std::pair<uint64_t, uint64_t>> recent;
  {
    std::lock_guard lk(mu_);
    recent = recent_;
  }
  for (const auto &[seq, handle] : recent) {
    if (is_job_error(dev_->wait_cs(ctx_id_, hw_ip(), 0, handle, 0))) return seq;
  }
  return 0;
}

bool KernelQueue::lost() const {
  std::lock_guard lk(mu_);
  return lost_;
}

void KernelQueue::fill_state(rvgl_rsp_queue_state *rsp) const {
  std::lock_guard lk(mu_);
  rsp->state = lost_ ? RVGL_QUEUE_STATE_LOST : RVGL_QUEUE_STATE_OK;
  rsp->flags = flags_;
  rsp->error = first_error_;
  rsp->last_submitted_seq = last_seq_.load(std::memory_order_acquire);
  rsp->last_completed_seq = timeline_->value();
}

}  // namespace rvgl
