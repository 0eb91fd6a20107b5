#include "exec/context.h"

#include <algorithm>
#include <cerrno>

#include "core/counters.h"
#include "core/runtime_knobs.h"
#include "exec/ring_worker.h"

namespace rvgl::emu {

namespace {
// amdgpu_sched_jobs: the kernel keeps this many fences per entity; older sequence numbers are
// reported signaled. A CS waits for the job this many back (prev_fence), so at most this many are
// unsignaled; the emulator keeps unsignaled ones regardless, so a wait is never wrong.
constexpr uint64_t kFenceWindow = 32;
}  // namespace

Context::Context(int32_t priority, uint32_t reset_counter, uint32_t vram_lost_counter)
    : priority_(priority), reset_counter_(reset_counter), vram_lost_counter_(vram_lost_counter) {
  counters().contexts_alive.fetch_add(1, std::memory_order_relaxed);
}

Context::~Context() {
  counters().contexts_alive.fetch_sub(1, std::memory_order_relaxed);
}

std::shared_ptr<Fence> Context::new_job_fence(const EntityKey &key) {
  return Fence::create(entities_[key].fence_context);
}

uint64_t Context::add_fence(const EntityKey &key, std::shared_ptr<Fence> fence) {
  Entity &e = entities_[key];
  const uint64_t seq = e.next_seq++;
  e.fences.emplace_back(seq, std::move(fence));
  while (e.fences.size() > kFenceWindow && e.fences.front().second->is_signaled())
    e.fences.pop_front();
  return seq;
}

int Context::get_fence(const EntityKey &key, uint64_t seq, std::shared_ptr<Fence> &out) {
  out = nullptr;
  auto it = entities_.find(key);
  const uint64_t next = it == entities_.end() ? 1 : it->second.next_seq;
  if (seq == ~uint64_t{0}) seq = next - 1;  // the newest job (amdgpu_ctx_get_fence)
  if (seq >= next) return -EINVAL;
  if (it == entities_.end()) return 0;
  // Sequence numbers in the window are consecutive: an index, as amdgpu_ctx_get_fence() takes
  // the slot seq & (amdgpu_sched_jobs - 1), not a search.
  const auto &fences = it->second.fences;
  if (!fences.empty() && seq >= fences.front().first) {
    const uint64_t i = seq - fences.front().first;
    if (i < fences.size()) out = fences[i].second;
  }
  return 0;
}

std::shared_ptr<Fence> Context::prev_fence(const EntityKey &key) const {
  auto it = entities_.find(key);
  if (it == entities_.end() || it->second.next_seq <= kFenceWindow) return nullptr;
  const uint64_t seq = it->second.next_seq - kFenceWindow;
  const auto &fences = it->second.fences;
  if (fences.empty() || seq < fences.front().first) return nullptr;  // dropped: signaled
  const uint64_t i = seq - fences.front().first;
  if (i >= fences.size()) return nullptr;
  const std::shared_ptr<Fence> &f = fences[i].second;
  return f->is_signaled() ? nullptr : f;
}

int Context::entity_error(const EntityKey &key) const {
  std::lock_guard lk(FenceDomain::mutex());
  return entity_error_locked(key);
}

int Context::entity_error_locked(const EntityKey &key) const {
  if (!knobs().entity_errors.load(std::memory_order_relaxed)) return 0;  // a kernel before 6.5
  auto it = last_scheduled_.find(key);
  return it == last_scheduled_.end() ? 0 : it->second->error_locked();
}

void Context::set_last_scheduled_locked(const EntityKey &key, std::shared_ptr<Fence> fence) {
  last_scheduled_[key] = std::move(fence);
}

void Context::flush_entities() {
  // No reference is left, so no CS can reach the context to add an entity: read without the lock.
  std::vector<RingWorker *> workers;
  for (const auto &[key, e] : entities_)
    if (e.worker && std::find(workers.begin(), workers.end(), e.worker) == workers.end())
      workers.push_back(e.worker);
  if (workers.empty()) return;
  // drm_sched_entity_flush(), for a process that is not exiting:
  // wait_event_killable(sched->job_scheduled, drm_sched_entity_is_idle(entity)), no timeout.
  std::unique_lock lk(FenceDomain::mutex());
  FenceDomain::wait_until(
      lk, never(),
      [&] {
        return std::all_of(workers.begin(), workers.end(),
                           [&](RingWorker *w) { return w->entity_idle_locked(*this); });
      },
      [&](Waiter &w) {
        for (RingWorker *r : workers)
          r->subscribe_entity_locked(w, *this);
      });
}

}  // namespace rvgl::emu
