// SPM_ACQUIRE, SPM_RELEASE, SPM_SET_DEST (DESIGN.md D6, docs/spm.md).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "context/compute_context.h"
#include "spm/spm_arbiter.h"
#include "spm/spm_reaper.h"
#include "util/checked_math.h"

namespace rvgl {

namespace {

// A guest cannot make the SPM worker (or context destroy) wait longer than this.
constexpr uint32_t kMaxSpmTimeoutMs = 10000;

bool valid_ring(uint32_t r) {
  return r >= RVGL_RING_FIRST_QUEUE && r <= RVGL_RING_LAST_QUEUE;
}

}  // namespace

uint64_t ComputeContext::device_key() const {
  struct stat st;
  return fstat(dev_->fd(), &st) == 0 ? static_cast<uint64_t>(st.st_rdev) : 0;
}

int ComputeContext::spm_check(uint32_t xcp) const {
  if (!(facts_.capset.features & RVGL_FEATURE_SPM)) return -ENODEV;
  if (xcp >= facts_.capset.num_xcp || xcp >= spm_.size()) return -EINVAL;
  return 0;
}

int32_t ComputeContext::cmd_spm_acquire(const Request &req, Response &) {
  const auto &q = req.as<rvgl_req_spm_acquire>();
  if (int err = spm_check(q.xcp)) return err;
  if (spm_[q.xcp]) return -EALREADY;
  if (!valid_ring(q.ring_idx)) return -EINVAL;
  if (rings_[q.ring_idx] != RingUse::kFree) return -EBUSY;
  const uint64_t key = device_key();
  if (!SpmArbiter::instance().try_acquire(key, q.xcp, ctx_id_)) return -EBUSY;
  // The process-wide entry is given back on every way out but success, an exception included
  // (memory, on the way to the API guard): kept, it would refuse this SPM to every context.
  struct Claim {
    uint64_t key;
    uint32_t xcp, ctx;
    bool kept = false;
    ~Claim() {
      if (!kept) SpmArbiter::instance().release(key, xcp, ctx);
    }
  } claim{key, q.xcp, ctx_id_};

  if (!spm_callbacks_) {
    // Run on an SPM worker, until the destructor cuts them (before anything they use goes). A
    // request with a response slot was only accepted once the shared page existed; one without
    // may have been accepted before the guest made the page, which it may be making now.
    auto done = [this](uint32_t xcp, uint32_t rsp_off, const rvgl_rsp_spm_set_dest &rsp) {
      if (rsp.has_data_loss) post_event(RVGL_EVENT_SPM_DATA_LOSS, xcp, rsp.has_data_loss, 0);
      SharedPage *page = shmem_published_.load(std::memory_order_acquire);
      if (!page) return;
      if (rsp_off != RVGL_RSP_NONE)
        page->view().write_response(rsp_off,
                                    {reinterpret_cast<const uint8_t *>(&rsp), sizeof(rsp)});
      else if (rsp.hdr.result != 0)
        page->view().bump_async_error();  // failed with no slot to say so (PROTOCOL.md §4)
    };
    FenceDelivery *delivery = delivery_.get();
    spm_callbacks_ = std::make_shared<SpmCallbacks>(done, [delivery] { delivery->progress(); });
  }
  if (int err = SpmSession::create(dev_, q.xcp, q.ring_idx, spm_callbacks_, &spm_[q.xcp]))
    return err;
  claim.kept = true;
  rings_[q.ring_idx] = RingUse::kSpm;
  ring_queue_[q.ring_idx] = q.xcp;
  return 0;
}

void ComputeContext::release_spm(uint32_t xcp) {
  std::unique_ptr<SpmSession> s = std::move(spm_[xcp]);
  if (!s) return;
  rings_[s->ring_idx()] = RingUse::kFree;
  ring_queue_[s->ring_idx()] = 0;
  const uint64_t key = device_key();
  const uint32_t ctx = ctx_id_;
  // With nothing in the kernel the session is finished here and the SPM is free when this
  // returns: its worker waits for no kernel call, so joining it is short, and a thread to do it
  // would let a guest that acquires and releases in a loop start threads faster than they end.
  // A SET_DEST under way keeps the SPM ours (arbiter and kernel) until the reaper has finished
  // the session: an ACQUIRE of any context gets -EBUSY meanwhile, for at most the remaining
  // SET_DEST timeout, so the reaper runs at most one such thread per device XCP.
  if (s->release_if_idle()) {
    s.reset();
    SpmArbiter::instance().release(key, xcp, ctx);
    return;
  }
  SpmReaper::instance().retire(std::move(s),
                               [key, xcp, ctx] { SpmArbiter::instance().release(key, xcp, ctx); });
}

int32_t ComputeContext::cmd_spm_release(const Request &req, Response &) {
  const auto &q = req.as<rvgl_req_spm_release>();
  if (int err = spm_check(q.xcp)) return err;
  if (!spm_[q.xcp]) return -EPERM;
  release_spm(q.xcp);
  return 0;
}

int32_t ComputeContext::cmd_spm_set_dest(const Request &req, Response &) {
  const auto &q = req.as<rvgl_req_spm_set_dest>();
  if (int err = spm_check(q.xcp)) return err;
  SpmSession *s = spm_[q.xcp].get();
  if (!s) return -EPERM;
  SpmSession::Destination dst;
  if (q.size) {
    if (q.size > UINT32_MAX || q.size % 32) return -EINVAL;
    if (int err = memory_->lookup_object(q.bo, q.res_id, &dst.object)) return err;
    if (!range_within(q.offset, q.size, dst.object->size())) return -EINVAL;
    // The kernel writes into it: never into memory the guest gave read-only.
    if (dst.object->gpu_read_only()) return -EACCES;
    // Samples go to memory: not a doorbell page (its writes would ring the context's own
    // queues' doorbells), nor one the host cannot map.
    if (dst.object->bo_flags() & RVGL_BO_FLAG_NO_CPU_ACCESS) return -EINVAL;
    if (dst.object->domain() == RVGL_DOMAIN_DOORBELL) return -EINVAL;
    dst.size = static_cast<uint32_t>(q.size);
    if (dst.object->kind() == MemoryObject::Kind::kUserptr) {
      // Guest-owned pages never reach the kernel: it writes a host buffer, delivered into the
      // pages when retired unless the resource was dropped meanwhile (spm_session.h).
      // Host RAM the guest makes us hold: charged as GTT until the destination is retired.
      Charge charge;
      if (int err = memory_->charge_host_buffer(dst.size, &charge)) return err;
      dst.bounce = SpmSession::make_bounce(dst.size, std::move(charge));
      if (!dst.bounce) return -ENOMEM;
      dst.host = dst.bounce->as<uint8_t>();
      dst.guest_offset = q.offset;
      dst.slices = std::max<uint32_t>(1, facts_.capset.num_xcc);
    } else {
      int err = -EINVAL;
      dst.host = dst.object->host_range(q.offset, q.size, &dst.host_mapping, &err);
      if (!dst.host) return err;
    }
  }
  const uint32_t timeout = std::min(q.timeout_ms, kMaxSpmTimeoutMs);
  if (int err = s->set_dest(std::move(dst), timeout, req.seqno, req.rsp_off)) return err;
  return kDeferred;
}

}  // namespace rvgl
