// One file's GPU virtual address space: what GEM_VA mapped where, with which permissions, and the
// last fault. Every GPU access of a job goes through resolve(); nothing reaches memory otherwise.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "memory/buffer_object.h"

namespace rvgl::emu {

// GCVM_L2_PROTECTION_FAULT_STATUS fields (gc_11_0_0_sh_mask.h): MORE_FAULTS bit 0, WALKER_ERROR
// 3:1, PERMISSION_FAULTS 7:4, MAPPING_ERROR 8, CID 15:9, RW 18, VMID 23:20.
namespace fault_status {
inline constexpr uint32_t kPermissionShift = 4;
inline constexpr uint32_t kPermRead = 1u << 1, kPermWrite = 1u << 2, kPermExecute = 1u << 3;
inline constexpr uint32_t kMappingError = 1u << 8;
inline constexpr uint32_t kRwWrite = 1u << 18;
inline constexpr uint32_t kVmidShift = 20;
}  // namespace fault_status

struct VmFault {
  uint64_t addr = 0;  // page address, as the hardware reports it
  uint32_t status = 0;
  uint32_t vmhub = 0;
};

enum class VmAccess { Read, Write, Execute };

struct VmPiece {
  std::shared_ptr<Backing> backing;  // null for a PRT range (reads zero, writes vanish)
  uint64_t offset;
  uint64_t len;
};

// What a job that sees only the VM's current mappings passes as its ticket (tests).
inline constexpr uint64_t kNoVmTicket = std::numeric_limits<uint64_t>::max();
// What an engine that reads the page tables as they are passes (a user queue: EngineAccess).
inline constexpr uint64_t kPageTableView = std::numeric_limits<uint64_t>::max() - 1;

class Fence;

class GpuVm {
 public:
  // A submission's place among the VM's jobs, from its CS until it is done. A mapping removed
  // while older jobs are in flight stays visible to them: the kernel clears freed page-table
  // entries only after the VM's command submissions in flight have finished
  // (amdgpu_vm_clear_freed(): "Implicitly sync to command submissions in the same VM before
  // unmapping", AMDGPU_SYNC_EQ_OWNER on the root page directory's reservation; the same for a
  // mapping replaced or dropped with its object's last handle, amdgpu_vm_bo_del()).
  class Ticket {
   public:
    Ticket() = default;
    explicit Ticket(std::shared_ptr<GpuVm> vm) : vm_(std::move(vm)), seq_(vm_->begin_job()) {}
    Ticket(Ticket &&o) noexcept : vm_(std::move(o.vm_)), seq_(o.seq_) {}
    Ticket &operator=(Ticket &&o) noexcept {
      end();
      vm_ = std::move(o.vm_);
      seq_ = o.seq_;
      return *this;
    }
    ~Ticket() { end(); }
    uint64_t seq() const { return vm_ ? seq_ : kNoVmTicket; }
    // The job is done: what was unmapped since it was submitted may now go.
    void end() {
      if (vm_) vm_->end_job(seq_);
      vm_.reset();
    }

   private:
    std::shared_ptr<GpuVm> vm_;
    uint64_t seq_ = 0;
  };

  // One access of an engine that reads the page tables as they are (kPageTableView: a user
  // queue), from its translation until its last byte has moved. Such an engine still sees a
  // removed mapping until the removal's page-table update has run: after the VM's jobs submitted
  // before it (above), after RVGL_EMU_VM_UPDATE_US while an engine reads the VM (the update is a
  // job on the VM's own entity, then a TLB flush: the GEM_VA ioctl returns first), and, since
  // the emulator translates a whole access before it moves a byte, after every access that began
  // before the removal.
  class EngineAccess {
   public:
    EngineAccess(GpuVm &vm, uint64_t ticket)
        : vm_(ticket == kPageTableView ? &vm : nullptr), seq_(vm_ ? vm_->begin_access() : 0) {}
    ~EngineAccess() {
      if (vm_) vm_->end_access(seq_);
    }
    EngineAccess(const EngineAccess &) = delete;
    EngineAccess &operator=(const EngineAccess &) = delete;

   private:
    GpuVm *vm_;
    uint64_t seq_;
  };

  ~GpuVm();

  // An engine reads this VM from now on until engine_gone() (a user queue's loop): removals
  // wait out RVGL_EMU_VM_UPDATE_US meanwhile.
  void engine_attached();
  void engine_gone();
  // In a forked child: no engine and no access of the parent's threads exists there; what they
  // held back completes.
  void after_fork_child();
  // Completes the removals whose update has run by now: takes them off the front (their updates
  // run in order) and signals their fences, without the lock. The engine's loop calls it as it
  // polls, and every access and job as it ends, as nothing else may happen once the delay is
  // over. Allocates nothing (a job's end must not fail).
  void complete_due();
  // The fence of the newest removal's page-table update (vm_timeline_syncobj_out: "the last
  // relevant update"; the VM's updates complete in order), null when every update has run.
  std::shared_ptr<Fence> update_fence() const;

  // GEM_VA operations on page-aligned, validated arguments; return 0 or -errno as the kernel does.
  int map(std::shared_ptr<BufferObject> bo, uint64_t va, uint64_t offset, uint64_t size,
          uint32_t flags);
  int unmap(const BufferObject *bo, uint64_t va);
  void clear(uint64_t va, uint64_t size);
  int replace(std::shared_ptr<BufferObject> bo, uint64_t va, uint64_t offset, uint64_t size,
              uint32_t flags);
  // Drops every mapping of `bo` (its last handle in this file closed).
  void remove_bo(const BufferObject *bo);
  size_t mapping_count() const;
  // Whether [va, va+size) lies inside one mapping (the user-queue checks).
  bool covered_by_one_mapping(uint64_t va, uint64_t size) const;
  // The object mapped at va, or null (amdgpu_vm_bo_lookup_mapping(), for the user-queue checks).
  std::shared_ptr<BufferObject> bo_at(uint64_t va) const;

  // Resolves an access; false with `fault` filled when any byte is unmapped or not permitted.
  // `injected` is a VA range the configuration declares faulting.
  // `ticket`: the job's Ticket::seq(); mappings removed after it was submitted still resolve.
  bool resolve(uint64_t va, uint64_t len, VmAccess access, std::vector<VmPiece> &out,
               VmFault &fault, uint64_t injected_va = 0, uint64_t injected_len = 0,
               uint64_t ticket = kNoVmTicket) const;

  // The fault interrupt's handler (amdgpu_vm_update_fault_cache): the VM's fault cache takes
  // `f`, and the emulator's vm_faults counter counts it.
  void record_fault(const VmFault &f);
  VmFault last_fault() const;

  std::mutex &fork_lock() { return mu_; }

 private:
  struct Mapping {
    uint64_t size;
    std::shared_ptr<BufferObject> bo;
    uint64_t offset;
    uint32_t flags;
  };
  // A removed mapping jobs submitted up to `last_job` still see, and the page tables until its
  // update has run (done: no job or engine access up to last_job left, and not before
  // `not_before_ns`); `done` signals then.
  struct Freed {
    uint64_t va;
    Mapping m;
    uint64_t last_job;
    int64_t not_before_ns;
    std::shared_ptr<Fence> done;
    // Engine accesses up to this place translated through it and may still be moving bytes
    // (written by resolve(), a const look, under mu_).
    mutable uint64_t read_by = 0;
  };
  int insert_locked(std::shared_ptr<BufferObject> bo, uint64_t va, uint64_t offset, uint64_t size,
                    uint32_t flags);
  void clear_locked(uint64_t va, uint64_t size);
  // Every removal goes through here: kept while an older job is in flight.
  void retire_locked(uint64_t va, const Mapping &m);
  uint64_t begin_job();
  void end_job(uint64_t seq);
  uint64_t begin_access();
  // Completes what the access held back, and what is due (an engine busy with a long batch does
  // not poll: its accesses do).
  void end_access(uint64_t seq);
  bool done_locked(const Freed &f, int64_t now_ns) const;
  // The mapping a job with `ticket` sees at `va` (start VA in *start), or null.
  const Mapping *find_locked(uint64_t va, uint64_t ticket, int64_t now_ns, uint64_t *start) const;

  mutable std::mutex mu_;
  std::map<uint64_t, Mapping> maps_;  // by start VA (48-bit)
  std::vector<Freed> freed_;          // usually empty: only while jobs older than a removal run
  std::set<uint64_t> in_flight_;      // tickets of jobs not yet done
  std::set<uint64_t> reading_;        // engine accesses in progress, by their place among jobs
  uint64_t jobs_ = 0;                 // tickets and access places handed out
  uint32_t engines_ = 0;              // user queues reading the page tables
  VmFault fault_;
};

}  // namespace rvgl::emu
