// The GPU's view of memory during one job: every access is translated through the submitting
// file's VM; the first fault stops the job and is kept for the fault query.
#pragma once

#include <cstdint>
#include <vector>

#include "memory/gpu_vm.h"

namespace rvgl::emu {

class GpuMemory {
 public:
  GpuMemory(const GpuVm &vm, uint64_t injected_fault_va, uint64_t injected_fault_len)
      : vm_(vm), inj_va_(injected_fault_va), inj_len_(injected_fault_len) {}

  bool read(uint64_t va, void *dst, uint64_t len);
  bool write(uint64_t va, const void *src, uint64_t len);
  bool read32(uint64_t va, uint32_t &v) { return read(va, &v, 4); }
  bool write32(uint64_t va, uint32_t v) { return write(va, &v, 4); }
  bool write64(uint64_t va, uint64_t v) { return write(va, &v, 8); }
  // A DMA copy (both ranges translated before any byte moves).
  bool copy(uint64_t dst, uint64_t src, uint64_t len);
  // Fills len bytes with the low `elem` bytes of `pattern` repeated (elem 1, 2 or 4).
  bool fill(uint64_t dst, uint32_t pattern, uint32_t elem, uint64_t len);

  bool faulted() const { return faulted_; }
  const VmFault &fault() const { return fault_; }
  uint64_t bytes_copied() const { return bytes_copied_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  bool resolve(uint64_t va, uint64_t len, VmAccess a, std::vector<VmPiece> &out);
  void host_fault(uint64_t va, VmAccess a);

  const GpuVm &vm_;
  uint64_t inj_va_, inj_len_;
  bool faulted_ = false;
  VmFault fault_;
  uint64_t bytes_copied_ = 0, bytes_written_ = 0;
  std::vector<VmPiece> a_, b_;
};

}  // namespace rvgl::emu
