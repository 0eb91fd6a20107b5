// QUEUE_CREATE, QUEUE_DESTROY, SUBMIT, QUEUE_STATE.
#include <cerrno>
#include <cstring>
#include <new>
#include <vector>

#include "context/compute_context.h"
#include "context/user_queue_checks.h"
#include "util/checked_math.h"

namespace rvgl {

namespace {

constexpr uint64_t kMaxIbBytes = uint64_t{0xfffff} * 4;  // the IB packets' 20-bit dword count
constexpr uint64_t kSdmaIbAlignment = 32;

bool valid_ring(uint32_t r) {
  return r >= RVGL_RING_FIRST_QUEUE && r <= RVGL_RING_LAST_QUEUE;
}

}  // namespace

int32_t ComputeContext::cmd_queue_create(const Request &req, Response &rsp) {
  const auto &q = req.as<rvgl_req_queue_create>();
  if (q.kind != RVGL_QUEUE_KIND_KERNEL && q.kind != RVGL_QUEUE_KIND_USER) return -EINVAL;
  if (q.ip != RVGL_IP_COMPUTE && q.ip != RVGL_IP_SDMA) return -EINVAL;
  const rvgl_capset &cap = facts_.capset;
  // PROTOCOL.md §2: a kind of queue the capset does not offer answers -ENODEV, whatever else the
  // request gets wrong (it answered -EBUSY, -ENOSPC or -EMFILE first).
  const bool kernel = q.kind == RVGL_QUEUE_KIND_KERNEL;
  const uint32_t feature = kernel ? RVGL_FEATURE_KERNEL_QUEUES : RVGL_FEATURE_USER_QUEUES;
  const uint32_t ips = kernel ? cap.kernel_queue_ip_mask : cap.user_queue_ip_mask;
  if (!(cap.features & feature) || !(ips & (1u << q.ip))) return -ENODEV;
  if (q.priority > RVGL_PRIORITY_HIGH || !valid_ring(q.ring_idx)) return -EINVAL;
  if (rings_[q.ring_idx] != RingUse::kFree) return -EBUSY;
  // A destroyed queue whose fences still wait keeps its kernel context, timeline, user fence
  // page and watch until they retire: it counts until then, or a guest destroying busy queues
  // in a loop would hold kernel objects and fds without a bound.
  collect_drained();
  if (queues_.size() + draining_.size() >= limits_.max_queues) return -ENOSPC;
  // Queues of many contexts together could take the descriptors the VMM keeps for itself (the
  // per-context quota does not see the others): refused before any is spent. A kernel queue
  // holds one (its completion watch's eventfd; the engine's import of its timeline takes another
  // for a moment, closed before the eventfd is made), and on the emulated kernel one more (its
  // user fence page's memfd, which a kernel does not spend).
  if (descriptor_left_ && !descriptor_left_(2)) return -EMFILE;

  auto entry = std::make_shared<Queue>();
  entry->ring_idx = q.ring_idx;
  if (kernel) {
    std::unique_ptr<KernelQueue> kq;
    if (int err = KernelQueue::create(dev_, q.ip, q.priority, &kq)) return err;
    entry->kernel = std::move(kq);
  } else {
    auto in_use = [this](const MemoryObject *db, uint32_t offset) {
      bool used = false;
      queues_.for_each([&](uint32_t, const Queue &e) {
        used |= e.user && e.user->doorbell() == db && e.user->doorbell_offset() == offset;
      });
      return used;
    };
    std::shared_ptr<MemoryObject> db;
    if (int err = check_user_queue({cap, memory_->va(), memory_->bos(), in_use}, q, &db))
      return err;
    std::unique_ptr<UserQueue> uq;
    if (int err = UserQueue::create(dev_, q, std::move(db), &uq)) return err;
    entry->user = std::move(uq);
  }
  Queue *raw = entry.get();
  const uint32_t handle = queues_.insert(std::move(entry));
  if (!handle) return -ENOSPC;
  // Until the queue is wired up, a failure (out of memory included) takes it back out: the guest
  // must not keep a handle to a queue the engine and the health owner do not know.
  auto undo = [&] {
    if (raw->watch_id) engine_->remove(raw->watch_id);
    health_->remove(handle);
    queues_.remove(handle);
  };
  try {
    if (raw->kernel) {
      // The engine watches the queue from now on; the health owner knows it before any work runs.
      health_->add(handle, raw->kernel);
      raw->watch = std::make_unique<QueueWatch>(raw->kernel, handle, *delivery_, *health_);
      if (int err = engine_->add(*raw->kernel->timeline(), raw->watch.get(), &raw->watch_id)) {
        undo();
        return err;
      }
    }
    if (raw->user) health_->add_user(handle, raw->user);
  } catch (const std::bad_alloc &) {
    undo();
    return -ENOMEM;
  }
  rings_[q.ring_idx] = RingUse::kQueue;
  ring_queue_[q.ring_idx] = handle;
  rsp.as<rvgl_rsp_queue_create>().queue = handle;
  return 0;
}

int32_t ComputeContext::cmd_queue_destroy(const Request &req, Response &) {
  const auto &q = req.as<rvgl_req_queue_destroy>();
  std::shared_ptr<Queue> entry = queues_.remove(q.queue);
  if (!entry) return -ENOENT;
  // Never looked at again: no health check, no event names it from here on.
  health_->remove(q.queue);
  if (entry->watch) {
    entry->watch->retire();
    // Its fences are those up to its newest on the ring (a ring's fences leave in order). Until
    // they retire and its jobs are done, the engine keeps watching its timeline and the kernel
    // context stays: freeing a context with queued jobs would block this thread, holding the
    // file's context lock, until they reach the ring (~KernelQueue).
    DrainingWatch d{std::move(entry->watch), entry->watch_id, entry->ring_idx, entry->last_fence};
    if (drained(d))
      engine_->remove(d.id);
    else
      draining_.push_back(std::move(d));
  }
  rings_[entry->ring_idx] = RingUse::kFree;
  ring_queue_[entry->ring_idx] = 0;
  return 0;
}

int32_t ComputeContext::cmd_submit(const Request &req, Response &rsp) {
  const auto &q = req.as<rvgl_req_submit>();
  Queue *entry = queues_.get(q.queue);
  if (!entry) return -ENOENT;
  if (!entry->kernel) return -EOPNOTSUPP;
  if (q.flags || q.num_ibs == 0 || q.num_ibs > facts_.capset.max_ibs_per_submit ||
      q.num_waits > limits_.max_waits_per_submit)
    return -EINVAL;
  // The arrays must lie inside what the guest sent, not in the zero-extension.
  const uint64_t need = sizeof(rvgl_req_submit) + uint64_t{q.num_ibs} * sizeof(rvgl_ib) +
                        uint64_t{q.num_waits} * sizeof(rvgl_wait);
  if (need > req.wire_len) return -EINVAL;

  const uint8_t *p = req.bytes.data() + sizeof(rvgl_req_submit);
  std::vector<rvgl_ib> ibs(q.num_ibs);
  std::memcpy(ibs.data(), p, q.num_ibs * sizeof(rvgl_ib));
  p += q.num_ibs * sizeof(rvgl_ib);
  // The kernel passes an IB's address and length to the ring's IB packet unchecked: a length
  // wider than the packet's 20-bit dword count spills into the control word's other fields
  // (gfx_v11_0_ring_emit_ib_compute: length_dw | vmid << 24), and the SDMA engine runs from the
  // address rounded down to 32 bytes (sdma_v6_0_ring_emit_ib). Either would run other commands
  // than the guest named.
  const uint64_t ib_align = entry->kernel->ip() == RVGL_IP_SDMA ? kSdmaIbAlignment : 4;
  for (const auto &ib : ibs) {
    if (ib.flags || ib.size == 0 || ib.size % 4 || ib.size > kMaxIbBytes || ib.va % ib_align ||
        !memory_->va().in_range(ib.va, ib.size))
      return -EINVAL;
  }
  std::vector<TimelinePoint> waits;
  waits.reserve(q.num_waits);
  for (uint32_t i = 0; i < q.num_waits; ++i, p += sizeof(rvgl_wait)) {
    rvgl_wait w;
    std::memcpy(&w, p, sizeof(w));
    const Queue *other = queues_.get(w.queue);
    if (!other) return -ENOENT;
    // pad is ignored, as every padding field is (PROTOCOL.md: send zero, ignore on receipt).
    if (!other->kernel || w.seq > other->kernel->last_submitted()) return -EINVAL;
    if (w.seq) waits.push_back({other->kernel->timeline()->handle(), w.seq});
  }
  uint32_t bo_list;
  if (int err = memory_->bo_list(&bo_list)) return err;
  uint64_t seq;
  if (int err = entry->kernel->submit(ibs, waits, bo_list, &seq)) {
    // The kernel refused the queue (guilty context, device gone): the health owner classifies.
    if (err == -ECANCELED || err == -ENODEV) health_->refused(q.queue);
    return err;
  }
  // Nothing else: the engine's watch on this queue already covers the new point.
  rsp.as<rvgl_rsp_submit>().seq = seq;
  return 0;
}

int32_t ComputeContext::cmd_queue_state(const Request &req, Response &rsp) {
  const auto &q = req.as<rvgl_req_queue_state>();
  Queue *entry = queues_.get(q.queue);
  if (!entry) return -ENOENT;
  auto &r = rsp.as<rvgl_rsp_queue_state>();
  if (entry->kernel) {
    entry->kernel->fill_state(&r);  // what the health owner published; never classified here
  } else {
    entry->user->fill_state(&r);  // what the health owner published; the guest tracks its ring
  }
  return 0;
}

}  // namespace rvgl
