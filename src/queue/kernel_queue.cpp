#include "queue/kernel_queue.h"

#include <cerrno>
#include <vector>

namespace rvgl {

namespace {

int32_t kernel_priority(uint32_t p) {
  switch (p) {
    case RVGL_PRIORITY_LOW: return AMDGPU_CTX_PRIORITY_LOW;
    case RVGL_PRIORITY_HIGH: return AMDGPU_CTX_PRIORITY_HIGH;
    default: return AMDGPU_CTX_PRIORITY_NORMAL;
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
  if (lost_) return -ECANCELED;
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
  for (const auto &ib : ib_data) chunks.push_back(chunk(AMDGPU_CHUNK_ID_IB, &ib, 1));
  if (!bos.empty()) chunks.push_back(chunk(AMDGPU_CHUNK_ID_BO_HANDLES, &bo_list, 1));
  if (!wait_data.empty())
    chunks.push_back(
        chunk(AMDGPU_CHUNK_ID_SYNCOBJ_TIMELINE_WAIT, wait_data.data(), wait_data.size()));
  chunks.push_back(chunk(AMDGPU_CHUNK_ID_SYNCOBJ_TIMELINE_SIGNAL, &signal, 1));

  uint64_t handle;
  int err = dev_->cs_submit(ctx_id_, chunks, &handle);
  if (err) {
    if (err == -ECANCELED || err == -ENODEV) mark_lost(err);
    return err;
  }
  last_seq_ = next;
  last_handle_ = handle;
  *seq = next;
  return 0;
}

void KernelQueue::query_state(rvgl_rsp_queue_state *rsp) {
  uint64_t flags = 0;
  if (dev_->ctx_query_state2(ctx_id_, &flags) == 0) {
    if (flags & AMDGPU_CTX_QUERY2_FLAGS_GUILTY) {
      rsp->flags |= RVGL_QUEUE_FLAG_GUILTY;
      mark_lost(-ECANCELED);
    } else if (flags & AMDGPU_CTX_QUERY2_FLAGS_RESET) {
      rsp->flags |= RVGL_QUEUE_FLAG_INNOCENT;
      mark_lost(-ECANCELED);
    }
    if (flags & AMDGPU_CTX_QUERY2_FLAGS_VRAMLOST) {
      rsp->flags |= RVGL_QUEUE_FLAG_VRAM_LOST;
      mark_lost(-ECANCELED);
    }
  }
  if (last_handle_) {
    // The job's own error (a VM fault, a timeout) when it failed.
    int r = dev_->wait_cs(ctx_id_, hw_ip(), 0, last_handle_, 0);
    if (r && r != -ETIME) mark_lost(r);
  }
  rsp->state = lost_ ? RVGL_QUEUE_STATE_LOST : RVGL_QUEUE_STATE_OK;
  rsp->last_submitted_seq = last_seq_;
  rsp->last_completed_seq = last_completed();
  rsp->error = first_error_;
}

}  // namespace rvgl
