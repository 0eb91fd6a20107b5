#include "exec/user_queue.h"

#include <amdgpu_drm.h>
#include <pthread.h>

#include <thread>
#include <vector>

#include "core/counters.h"
#include "core/runtime_knobs.h"
#include "exec/exec_context.h"

namespace rvgl::emu {

UserQueue::UserQueue(Params p) : p_(std::move(p)) {
  // The caller checked (offset + 1) * 8 <= size; doorbell objects are memfd-backed.
  if (uint8_t *v = p_.doorbell->backing()->view())
    doorbell_word_ = reinterpret_cast<uint64_t *>(v + uint64_t{p_.doorbell_offset} * 8);
  counters().userqs_alive.fetch_add(1, std::memory_order_relaxed);
}

UserQueue::~UserQueue() {
  stop();
  counters().userqs_alive.fetch_sub(1, std::memory_order_relaxed);
}

bool UserQueue::start() {
  if (!doorbell_word_) return false;
  // What the doorbell holds when the queue is created is not a write to it; taken here, before
  // the ioctl returns, so no write the caller makes afterwards can be mistaken for it.
  const uint64_t before = read_doorbell();
  // The engine reads the VM from its creation on (the MES maps the queue before the ioctl
  // returns) until its loop ends: removals wait out their page-table update meanwhile.
  p_.vm->engine_attached();
  if (thread_.start([this, before] { loop(before); })) return true;
  p_.vm->engine_gone();
  return false;
}

uint64_t UserQueue::read_doorbell() const {
  return __atomic_load_n(doorbell_word_, __ATOMIC_ACQUIRE);
}

void UserQueue::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool UserQueue::process(uint64_t rptr, uint64_t wptr) {
  RuntimeKnobs &k = knobs();
  // Compute/GFX ring pointers count dwords; SDMA ring pointers count bytes
  // (sdma_v6_0_ring_set_wptr() writes ring->wptr << 2 to memory and the doorbell).
  const bool sdma = p_.ip == AMDGPU_HW_IP_DMA;
  // The MQD holds the ring size as a power of two, rounded up (CP_HQD_PQ_CONTROL.QUEUE_SIZE =
  // order_base_2(dwords) - 1 in the MES MQD setup): the engine wraps there.
  uint64_t ring_dw = 1;
  while (ring_dw < p_.queue_size / 4)
    ring_dw <<= 1;
  const uint64_t start_dw = sdma ? rptr / 4 : rptr;
  const uint64_t count_dw = sdma ? (wptr - rptr) / 4 : wptr - rptr;
  if (count_dw > ring_dw || (sdma && ((wptr | rptr) & 3))) return false;

  // The engine reads the page tables as they are, not as the last GEM_VA left them.
  GpuMemory mem(*p_.vm, k.fault_va.load(), k.fault_len.load(),
                fault_policy_from_knob(k.vm_fault_stop.load()), kPageTableView);
  std::vector<uint32_t> buf(static_cast<size_t>(count_dw));
  const uint64_t pos = start_dw % ring_dw;
  const uint64_t first = std::min(count_dw, ring_dw - pos);
  bool ok =
      mem.read(p_.queue_va + pos * 4, buf.data(), first * 4) &&
      (first == count_dw || mem.read(p_.queue_va, buf.data() + first, (count_dw - first) * 4));
  ExecStatus st = ExecStatus::Fault;
  if (ok) {
    ++batches_;
    if (k.hang_job.load() && batches_ == k.hang_job.load()) return false;
    if (const uint64_t us = k.job_latency_us.load())
      std::this_thread::sleep_for(std::chrono::microseconds(us));
    ExecContext cx{mem, *p_.profile, deadline_after_ms(k.lockup_timeout_ms.load()), stop_};
    st = sdma ? run_sdma(cx, buf.data(), buf.size(), 0) : run_pm4(cx, buf.data(), buf.size(), 0);
  }
  counters().bytes_copied.fetch_add(mem.bytes_copied(), std::memory_order_relaxed);
  counters().bytes_written.fetch_add(mem.bytes_written(), std::memory_order_relaxed);
  counters().userq_packets.fetch_add(count_dw, std::memory_order_relaxed);
  if (mem.faulted()) p_.vm->record_fault(mem.fault());
  if (st != ExecStatus::Ok) {
    counters().userq_batches_failed.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  counters().userq_batches_completed.fetch_add(1, std::memory_order_relaxed);
  // Report the read position as the engine does: the CP writes CP_HQD_PQ_RPTR, a 32-bit dword
  // offset inside the ring (gfx_v11_0_ring_get_rptr_compute() reads 32 bits); SDMA writes a
  // 64-bit byte count (sdma_v6_0_ring_get_rptr() reads 64 bits and shifts by 2).
  GpuMemory out(*p_.vm, 0, 0, FaultPolicy::Stop, kPageTableView);
  const bool written = sdma ? out.write64(p_.rptr_va, wptr)
                            : out.write32(p_.rptr_va, static_cast<uint32_t>(wptr % ring_dw));
  if (!written) {
    p_.vm->record_fault(out.fault());
    return false;
  }
  return true;
}

void UserQueue::loop(uint64_t rung) {
  pthread_setname_np(pthread_self(), "emu-userq");
  // Removals wait out their page-table update (RVGL_EMU_VM_UPDATE_US) while the engine runs;
  // this loop completes those that are due as it polls, and lets go of the VM as it ends.
  struct Detach {
    GpuVm &vm;
    ~Detach() { vm.engine_gone(); }
  } detach{*p_.vm};
  // The queue starts empty (the MQD's pointers are 0).
  uint64_t rptr = 0;
  auto idle = std::chrono::microseconds(10);
  while (!stop_.load()) {
    p_.vm->complete_due();
    const uint64_t bell = read_doorbell();
    if (bell != rung) {
      rung = bell;
      // The engine takes the doorbell's data as the new write pointer (the kernel's own rings
      // store wptr to memory, then WDOORBELL64(doorbell_index, wptr)).
      const uint64_t wptr = bell;
      if (wptr != rptr) {
        if (wptr < rptr || !process(rptr, wptr)) {
          hung_ = true;  // MES marks the queue hung; it executes nothing more
          return;
        }
        rptr = wptr;
      }
      idle = std::chrono::microseconds(10);
      continue;
    }
    // Nothing rung: back off from a short spin to the configured poll interval (the emulator
    // cannot trap the store itself, so it looks at the doorbell as the hardware's aperture would).
    std::unique_lock lk(mu_);
    cv_.wait_for(lk, idle, [&] { return stop_.load(); });
    idle = std::min(idle * 2, std::chrono::microseconds(knobs().userq_poll_us.load()));
  }
}

}  // namespace rvgl::emu
