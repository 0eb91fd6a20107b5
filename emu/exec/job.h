// One CS submission as the ring worker runs it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "exec/context.h"
#include "memory/buffer_object.h"
#include "memory/gpu_vm.h"
#include "sync/fence.h"
#include "sync/syncobj.h"

namespace rvgl::emu {

struct IbRange {
  uint64_t va;
  uint64_t bytes;
};

// What a job waits for before it runs: a fence, or a syncobj point that may not exist yet
// (a timeline wait with WAIT_FOR_SUBMIT resolves when the point is submitted).
struct JobDependency {
  std::shared_ptr<Fence> fence;
  std::shared_ptr<Syncobj> syncobj;
  uint64_t point = 0;
};

struct Job {
  std::shared_ptr<GpuVm> vm;
  GpuVm::Ticket vm_ticket;  // from the CS until the job is done
  std::shared_ptr<Context> ctx;
  uint32_t ip = 0, ring = 0;
  std::vector<IbRange> ibs;
  std::vector<JobDependency> deps;
  std::shared_ptr<Fence> fence;
  uint64_t seq = 0;
  uint64_t ordinal = 0;  // nth job of its context
  // Taken off the entity for the ring (drm_sched_entity_pop_job) while the job ahead of it still
  // ran: its prepare_job saw the entity as it was then (RingWorker::pop_behind_locked).
  bool popped = false;
  // What amdgpu_job_prepare_job() found when the job was popped: the entity's error, which the
  // job takes without running (FenceDomain lock).
  int prepare_error = 0;
  // The user fence (CS FENCE chunk): seq is written here when the job completes.
  std::shared_ptr<BufferObject> user_fence_bo;
  uint64_t user_fence_offset = 0;
  BoList bos;  // alive until the job is done (null: none)
};

}  // namespace rvgl::emu
