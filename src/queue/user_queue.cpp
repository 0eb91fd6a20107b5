#include "queue/user_queue.h"

#include <cerrno>
#include <new>

namespace rvgl {

namespace {

uint32_t userq_priority(uint32_t p) {
  switch (p) {
    case RVGL_PRIORITY_LOW:
      return RVGL_AMDGPU_USERQ_CREATE_FLAGS_QUEUE_PRIORITY_LOW;
    case RVGL_PRIORITY_HIGH:
      return RVGL_AMDGPU_USERQ_CREATE_FLAGS_QUEUE_PRIORITY_HIGH;
    default:
      return RVGL_AMDGPU_USERQ_CREATE_FLAGS_QUEUE_PRIORITY_NORMAL_LOW;
  }
}

}  // namespace

int UserQueue::create(std::shared_ptr<AmdgpuDevice> dev, const rvgl_req_queue_create &req,
                      std::shared_ptr<MemoryObject> doorbell, std::unique_ptr<UserQueue> *out) {
  // Compute queues take an EOP buffer, SDMA queues a context save area: the protocol's eop_va
  // carries whichever the engine needs (PROTOCOL.md, QUEUE_CREATE; mes_userq_mqd_create() reads
  // drm_amdgpu_userq_mqd_compute_gfx11.eop_va / drm_amdgpu_userq_mqd_sdma_gfx11.csa_va).
  rvgl_drm_amdgpu_userq_mqd_compute_gfx11 compute{req.eop_va};
  rvgl_drm_amdgpu_userq_mqd_sdma_gfx11 sdma{req.eop_va};
  const bool is_sdma = req.ip == RVGL_IP_SDMA;

  rvgl_drm_amdgpu_userq_in in{};
  in.ip_type = is_sdma ? AMDGPU_HW_IP_DMA : AMDGPU_HW_IP_COMPUTE;
  in.doorbell_handle = doorbell->segments()[0].handle;
  // The protocol counts 8-byte doorbells, as amdgpu_userq_get_doorbell_index() does for compute
  // and SDMA (db_size = sizeof(u64)): the index goes to the kernel unchanged.
  in.doorbell_offset = req.doorbell_offset;
  in.flags = userq_priority(req.priority);
  in.queue_va = req.queue_va;
  in.queue_size = req.queue_size;
  in.rptr_va = req.rptr_va;
  in.wptr_va = req.wptr_va;
  in.mqd = is_sdma ? reinterpret_cast<uintptr_t>(&sdma) : reinterpret_cast<uintptr_t>(&compute);
  in.mqd_size = is_sdma ? sizeof(sdma) : sizeof(compute);
  uint32_t id;
  if (int err = dev->userq_create(in, &id)) return err;
  // The kernel queue has exactly one owner from here: the object, or this free if it cannot be
  // made (its doorbell stays taken in the kernel otherwise).
  UserQueue *made =
      new (std::nothrow) UserQueue(dev, req.ip, id, std::move(doorbell), req.doorbell_offset);
  if (!made) {
    dev->userq_free(id);
    return -ENOMEM;
  }
  out->reset(made);
  return 0;
}

UserQueue::Observation UserQueue::observe() const {
  Observation o;
  o.error = dev_->userq_query_status(queue_id_, &o.queue_flags);
  if (o.error) o.queue_flags = 0;
  return o;
}

void UserQueue::fill_state(rvgl_rsp_queue_state *rsp) const {
  status_.fill(rsp, 0, 0);  // the host is not on the ring's path: no seqs
}

UserQueue::~UserQueue() {
  dev_->userq_free(queue_id_);
}

}  // namespace rvgl
