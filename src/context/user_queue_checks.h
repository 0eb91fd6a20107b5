// The user-queue half of QUEUE_CREATE: every field a guest sends for a user queue is checked here,
// against the rules the kernel and the engines apply (PROTOCOL.md section 6, QUEUE_CREATE), before
// anything reaches DRM_AMDGPU_USERQ.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "memory/handle_table.h"
#include "memory/memory_object.h"
#include "memory/va_space.h"
#include "rocm_virgl_protocol.h"

namespace rvgl {

struct UserQueueChecks {
  const rvgl_capset &capset;
  const VaSpace &va;
  const HandleTable<MemoryObject> &bos;
  // Whether another user queue of the context rings (doorbell object, doorbell index) already.
  std::function<bool(const MemoryObject *, uint32_t)> doorbell_in_use;
};

// 0 with *doorbell set to the DOORBELL object, or the protocol's error: -EINVAL (layout, sizes,
// alignment, ranges, doorbell offset), -EACCES (a range the engine writes is mapped without
// WRITE or on a read-only object), -ENOENT (unknown doorbell_bo), -EBUSY (doorbell taken).
int check_user_queue(const UserQueueChecks &c, const rvgl_req_queue_create &q,
                     std::shared_ptr<MemoryObject> *doorbell);

}  // namespace rvgl
