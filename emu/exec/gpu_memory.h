// The GPU's view of memory during one job: every access is translated through the submitting
// file's VM. What a fault does depends on amdgpu.vm_fault_stop (RVGL_EMU_VM_FAULT_STOP): by
// default (0) the hub redirects the faulting access to the dummy page — the write is dropped, the
// read returns zeros — and the engine carries on; with 2 the first fault stops the job. Either way
// the first fault of the job is kept for the VM's fault cache, and where the caller asks, it is
// put there when it happens, as the kernel's handler of the fault's own interrupt does while the
// job goes on.
#pragma once

#include <cstdint>
#include <vector>

#include "memory/gpu_vm.h"

namespace rvgl::emu {

// When the VM's fault cache learns of the job's first fault.
enum class FaultRecord {
  kByCaller,  // the caller records fault() (with the job's end, or not at all)
  // At once: the fault's interrupt is handled while the job runs (gmc_v9_0/gmc_v11_0's
  // process_interrupt -> amdgpu_vm_update_fault_cache() for the fault's own IH entry, whatever
  // the job does next).
  kAtFault,
};

enum class FaultPolicy {
  Continue,  // vm_fault_stop=0 or 1: gfxhub *_set_fault_enable_default(adev, true), the dummy page
  Stop,      // vm_fault_stop=2: the VM context halts on the fault, the job hangs
};

// The policy the knob selects (1 is 0 on the GFX9+ parts emulated: gpu_memory.cpp).
FaultPolicy fault_policy_from_knob(uint64_t vm_fault_stop);

class GpuMemory {
 public:
  // ticket: the job's GpuVm::Ticket::seq() (what it still sees of mappings removed since).
  GpuMemory(GpuVm &vm, uint64_t injected_fault_va, uint64_t injected_fault_len,
            FaultPolicy policy = FaultPolicy::Stop, uint64_t ticket = kNoVmTicket,
            FaultRecord record = FaultRecord::kByCaller)
      : vm_(vm),
        inj_va_(injected_fault_va),
        inj_len_(injected_fault_len),
        policy_(policy),
        ticket_(ticket),
        record_(record) {}

  // Each returns false only when the access faulted under FaultPolicy::Stop.
  bool read(uint64_t va, void *dst, uint64_t len);
  bool write(uint64_t va, const void *src, uint64_t len);
  bool read32(uint64_t va, uint32_t &v) { return read(va, &v, 4); }
  bool write32(uint64_t va, uint32_t v) { return write(va, &v, 4); }
  bool write64(uint64_t va, uint64_t v) { return write(va, &v, 8); }
  // A DMA copy (both ranges translated before any byte moves).
  bool copy(uint64_t dst, uint64_t src, uint64_t len);
  // Fills len bytes with the low `elem` bytes of `pattern` repeated (elem 1, 2 or 4).
  bool fill(uint64_t dst, uint32_t pattern, uint32_t elem, uint64_t len);

  // Whether any access faulted (under either policy), and the first fault. With
  // FaultRecord::kAtFault that fault is in the VM's cache already.
  bool faulted() const { return fault_seen_; }
  const VmFault &fault() const { return fault_; }
  uint64_t bytes_copied() const { return bytes_copied_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  bool resolve(uint64_t va, uint64_t len, VmAccess a, std::vector<VmPiece> &out);
  // Under Continue: the pieces of [va, va+len) page by page, a faulting page as a null piece.
  void resolve_around_faults(uint64_t va, uint64_t len, VmAccess a, std::vector<VmPiece> &out);
  void note_fault(const VmFault &f);
  // A userptr whose pages the caller unmapped: the hardware would see an invalid PTE. Returns
  // whether the access may go on (Continue).
  bool host_fault(uint64_t va, VmAccess a);

  GpuVm &vm_;
  uint64_t inj_va_, inj_len_;
  FaultPolicy policy_;
  uint64_t ticket_;
  FaultRecord record_;
  bool stopped_ = false;
  bool fault_seen_ = false;
  VmFault fault_;
  uint64_t bytes_copied_ = 0, bytes_written_ = 0;
  std::vector<VmPiece> a_, b_, page_;
};

}  // namespace rvgl::emu
