// Guest pages handed back to the VMM (detach, unref, context destroy) while the GPU may still
// reach them. The kernel clears a freed mapping's page-table entries only after the VM's command
// submissions in flight have finished ("Implicitly sync to command submissions in the same VM
// before unmapping": amdgpu_vm_clear_freed(), AMDGPU_SYNC_EQ_OWNER on the root page directory), so
// a job submitted while the pages were mapped keeps writing into them after our GEM_VA UNMAP
// returns. The VMM keeps the pages mapped, but the guest reuses them (another guest process, its
// kernel) once the VMM answers: so the answer waits for those jobs.
#include "context/compute_context.h"

#include <new>

#include "util/monotonic_clock.h"

namespace rvgl {

namespace {

// The kernel's job timeout ends a hung job long before this (amdgpu.lockup_timeout: 2 s on the
// newest kernels, 60 s for compute on the oldest); a host without one (-1) would otherwise hang
// the VMM for ever.
constexpr int64_t kGuestPagesWaitNs = 120'000'000'000;

}  // namespace

void ComputeContext::detach_resource(uint32_t res_id) {
  // Taken before the unmap: every job submitted while the pages were mapped. Conservative for
  // pages the guest unmapped (VA_UNMAP) before later jobs, which cannot reach them.
  const bool gpu_mapped = memory_->guest_pages_gpu_mapped(res_id);
  PageUsers users;
  if (gpu_mapped) users = guest_page_users();
  memory_->detach_resource(res_id);
  const int64_t deadline = monotonic_ns() + kGuestPagesWaitNs;
  wait_for_guest_page_users(users, deadline);
  // A user queue's work is not one of those jobs, and the kernel does not order it after the
  // unmap either: the page-table update the unmap queued must have run.
  if (gpu_mapped) memory_->wait_guest_pages_unmapped(deadline);
}

ComputeContext::PageUsers ComputeContext::guest_page_users() const {
  PageUsers users;
  try {
    users.snapshot = work_snapshot();
  } catch (const std::bad_alloc &) {
    users.all_work = true;
  }
  return users;
}

void ComputeContext::wait_for_guest_page_users(PageUsers &users) {
  wait_for_guest_page_users(users, monotonic_ns() + kGuestPagesWaitNs);
}

void ComputeContext::wait_for_guest_page_users(PageUsers &users, int64_t deadline) {
  if (users.all_work)
    wait_for_submitted_work(deadline);
  else if (!users.snapshot.empty())
    users.snapshot.wait(deadline);
}

}  // namespace rvgl
