#include "exec/gpu_memory.h"

#include <algorithm>
#include <cstring>

#include "memory/va_layout.h"
#include "util/user_memory.h"

namespace rvgl::emu {

FaultPolicy fault_policy_from_knob(uint64_t vm_fault_stop) {
  // amdgpu_drv.c vm_fault_stop: 0 = never (default), 1 = "print first", 2 = always. The GFX9+
  // hubs of both profiles turn the dummy-page redirect off for 2 alone (gmc_v9_0_hw_init,
  // gfx_v11_0_gfxhub_enable: value = vm_fault_stop == AMDGPU_VM_FAULT_STOP_ALWAYS ? false :
  // true); only gmc_v6/v7/v8's interrupt handlers (pre-GFX9) act on 1. So 1 is 0 here.
  return vm_fault_stop == 2 ? FaultPolicy::Stop : FaultPolicy::Continue;
}

// The status register latches the first fault; the follow-ups of a burst read back 0 and
// amdgpu_vm_update_fault_cache() ignores them, so the cache holds the first fault of the job.
void GpuMemory::note_fault(const VmFault &f) {
  if (!fault_seen_) {
    fault_ = f;
    if (record_ == FaultRecord::kAtFault) vm_.record_fault(f);
  }
  fault_seen_ = true;
  if (policy_ == FaultPolicy::Stop) stopped_ = true;
}

void GpuMemory::resolve_around_faults(uint64_t va, uint64_t len, VmAccess a,
                                      std::vector<VmPiece> &out) {
  out.clear();
  uint64_t at = va;
  const uint64_t end = va + len;
  while (at < end) {
    const uint64_t page_end = (at | (va::kGpuPageSize - 1)) + 1;
    const uint64_t n = std::min(end, page_end == 0 ? end : page_end) - at;
    VmFault f;
    if (vm_.resolve(at, n, a, page_, f, inj_va_, inj_len_, ticket_)) {
      out.insert(out.end(), page_.begin(), page_.end());
    } else {
      note_fault(f);
      out.push_back(VmPiece{nullptr, 0, n});  // the dummy page: reads zero, writes vanish
    }
    at += n;
  }
}

bool GpuMemory::resolve(uint64_t va, uint64_t len, VmAccess a, std::vector<VmPiece> &out) {
  if (stopped_) return false;
  VmFault f;
  if (vm_.resolve(va, len, a, out, f, inj_va_, inj_len_, ticket_)) return true;
  if (policy_ == FaultPolicy::Stop || va + len < va) {
    note_fault(f);
    stopped_ = true;
    return false;
  }
  resolve_around_faults(va, len, a, out);
  return true;
}

bool GpuMemory::host_fault(uint64_t va, VmAccess a) {
  VmFault f;
  f.addr = va & ~uint64_t{4095};
  f.status = fault_status::kMappingError | (1u << fault_status::kVmidShift) |
             (a == VmAccess::Write ? fault_status::kRwWrite : 0);
  f.vmhub = 0;
  note_fault(f);
  return !stopped_;
}

bool GpuMemory::read(uint64_t va, void *dst, uint64_t len) {
  const GpuVm::EngineAccess access(vm_, ticket_);
  if (!resolve(va, len, VmAccess::Read, a_)) return false;
  auto *out = static_cast<uint8_t *>(dst);
  uint64_t at = va;
  for (const auto &p : a_) {
    if (!p.backing)
      std::memset(out, 0, p.len);
    else if (!p.backing->read(p.offset, out, p.len)) {
      if (!host_fault(at, VmAccess::Read)) return false;
      std::memset(out, 0, p.len);
    }
    out += p.len;
    at += p.len;
  }
  return true;
}

bool GpuMemory::write(uint64_t va, const void *src, uint64_t len) {
  const GpuVm::EngineAccess access(vm_, ticket_);
  if (!resolve(va, len, VmAccess::Write, a_)) return false;
  auto *in = static_cast<const uint8_t *>(src);
  uint64_t at = va;
  for (const auto &p : a_) {
    if (p.backing && !p.backing->write(p.offset, in, p.len) && !host_fault(at, VmAccess::Write))
      return false;
    in += p.len;
    at += p.len;
  }
  bytes_written_ += len;
  return true;
}

bool GpuMemory::copy(uint64_t dst, uint64_t src, uint64_t len) {
  const GpuVm::EngineAccess access(vm_, ticket_);
  if (!resolve(src, len, VmAccess::Read, a_) || !resolve(dst, len, VmAccess::Write, b_))
    return false;
  size_t si = 0, di = 0;
  uint64_t soff = 0, doff = 0, done = 0;
  std::vector<uint8_t> zeros;
  while (done < len) {
    const VmPiece &s = a_[si];
    const VmPiece &d = b_[di];
    const uint64_t n = std::min(s.len - soff, d.len - doff);
    bool ok = true;
    if (d.backing) {
      uint8_t *sv = s.backing ? s.backing->view() : nullptr;
      uint8_t *dv = d.backing->view();
      if (!s.backing) {
        zeros.assign(std::min<uint64_t>(n, 1 << 16), 0);
        for (uint64_t z = 0; ok && z < n; z += zeros.size())
          ok = d.backing->write(d.offset + doff + z, zeros.data(),
                                std::min<uint64_t>(zeros.size(), n - z));
      } else if (sv && dv) {
        std::memmove(dv + d.offset + doff, sv + s.offset + soff, n);
      } else if (dv) {
        ok = s.backing->read(s.offset + soff, dv + d.offset + doff, n);
      } else if (sv) {
        ok = d.backing->write(d.offset + doff, sv + s.offset + soff, n);
      } else {
        ok = copy_user_to_user(d.backing->user_address() + d.offset + doff,
                               s.backing->user_address() + s.offset + soff, n) == 0;
      }
    }
    if (!ok && !host_fault(dst + done, VmAccess::Write)) return false;
    done += n;
    soff += n;
    doff += n;
    if (soff == s.len) ++si, soff = 0;
    if (doff == d.len) ++di, doff = 0;
  }
  bytes_copied_ += len;
  return true;
}

bool GpuMemory::fill(uint64_t dst, uint32_t pattern, uint32_t elem, uint64_t len) {
  const GpuVm::EngineAccess access(vm_, ticket_);
  if (!resolve(dst, len, VmAccess::Write, a_)) return false;
  uint8_t pat[4];
  std::memcpy(pat, &pattern, 4);
  std::vector<uint8_t> chunk;
  uint64_t pos = 0;  // byte position in the whole fill, so the pattern phase carries over pieces
  for (const auto &p : a_) {
    if (p.backing) {
      if (uint8_t *v = p.backing->view()) {
        uint8_t *out = v + p.offset;
        if (elem == 1 || (elem == 4 && pattern == 0)) {
          std::memset(out, pat[0], p.len);
        } else {
          for (uint64_t i = 0; i < p.len; ++i)
            out[i] = pat[(pos + i) % elem];
        }
      } else {
        chunk.resize(static_cast<size_t>(std::min<uint64_t>(p.len, 1 << 16)));
        for (uint64_t off = 0; off < p.len; off += chunk.size()) {
          const uint64_t n = std::min<uint64_t>(chunk.size(), p.len - off);
          for (uint64_t i = 0; i < n; ++i)
            chunk[i] = pat[(pos + off + i) % elem];
          if (!p.backing->write(p.offset + off, chunk.data(), n) &&
              !host_fault(dst + pos + off, VmAccess::Write))
            return false;
        }
      }
    }
    pos += p.len;
  }
  bytes_written_ += len;
  return true;
}

}  // namespace rvgl::emu
