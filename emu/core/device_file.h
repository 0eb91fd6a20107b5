// One open file description of a render (or primary) node: the kernel's drm_file + amdgpu_fpriv.
// Its own GPU VM and handle namespaces; two opens of the same node share nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/handle_table.h"
#include "core/open_file.h"
#include "exec/context.h"
#include "exec/user_queue.h"
#include "memory/buffer_object.h"
#include "memory/gpu_vm.h"
#include "sync/syncobj.h"
#include "sync/wait_queue.h"
#include "util/unique_fd.h"

namespace rvgl::emu {

class Device;

class DeviceFile final : public OpenFile {
 public:
  DeviceFile(Device &device, bool primary);
  ~DeviceFile() override;

  Device &device;
  const bool primary;
  const uint64_t id;  // unique per process, never reused
  const std::shared_ptr<GpuVm> vm;

  // Everything below: emulator state lock held.
  std::shared_ptr<BufferObject> bo(uint32_t handle);
  // The handle of `bo` in this file, creating one if it has none (as drm_gem_handle_create and
  // PRIME import's "same object, same handle" rule do).
  uint32_t handle_for(std::shared_ptr<BufferObject> bo);
  // GEM_CLOSE: false for an unknown handle. The object's mappings in this VM go with it.
  bool close_handle(uint32_t handle);

  HandleTable<std::shared_ptr<BufferObject>> bos;
  std::unordered_map<const BufferObject *, uint32_t> bo_handles;
  // Objects imported from a dma-buf of another device (or a udmabuf), by their pages.
  std::unordered_map<const Backing *, uint32_t> foreign_imports;
  // Its own lock, the kernel's amdgpu_ctx_mgr.lock: CTX, WAIT_CS and WAIT_FENCES take only it,
  // never the state lock a CS holds throughout. The same lock guards every context's fence ring
  // (the kernel's ctx->ring_lock, held as briefly).
  SharedHandleTable<Context> contexts;
  // amdgpu_ctx_mgr.lock held for long: amdgpu_ctx_free() keeps it while the freed context's
  // entities drain (drm_sched_entity_flush), so every lookup that takes it (CTX, amdgpu_ctx_get()
  // in CS, WAIT_CS, WAIT_FENCES, FENCE_TO_HANDLE) waits meanwhile (ctx_mgr_lock()). Set under
  // contexts.mutex(), cleared and waited for under the domain lock (ctx_mgr_released); a flag, not
  // a mutex, so a fork never waits for a drain and the child starts with it clear.
  std::atomic<bool> ctx_mgr_held{false};
  WaitQueue ctx_mgr_released;
  SharedHandleTable<Syncobj> syncobjs;  // its own lock: SYNCOBJ_EVENTFD needs no state lock
  HandleTable<BoList> bo_lists;
  HandleTable<std::shared_ptr<UserQueue>> userqs;
  uint64_t jobs_submitted = 0;
};

}  // namespace rvgl::emu
