// A DRM sync object: binary (one fence) or a timeline of (point, fence) pairs, as
// drivers/gpu/drm/drm_syncobj.c keeps them. Guarded by FenceDomain::mutex().
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sync/fence.h"
#include "sync/eventfd_ref.h"

namespace rvgl::emu {

class Syncobj {
 public:
  Syncobj();
  ~Syncobj();

  // All below: FenceDomain::mutex() held.
  // Binary replace (SIGNAL, RESET with null, CS out-syncobj, sync-file import, transfer to 0).
  void replace_locked(std::shared_ptr<Fence> fence);
  // Timeline point (TIMELINE_SIGNAL, CS timeline signal, transfer to a point).
  void add_point_locked(uint64_t point, std::shared_ptr<Fence> fence);
  // Room for one more point, made before an operation that must not fail once done (the kernel
  // allocates the chain node first: amdgpu_gem_update_timeline_node()).
  void reserve_point_locked() { points_.reserve(points_.size() + 1); }
  // Whether a fence for `point` exists yet (0: the syncobj has any fence).
  bool available_locked(uint64_t point) const;
  // The fences a wait on `point` must see signaled (empty: already satisfied).
  std::vector<std::shared_ptr<Fence>> fences_for_locked(uint64_t point) const;
  bool signaled_locked(uint64_t point) const;
  // DRM_IOCTL_SYNCOBJ_QUERY: the last signaled point, or with last_submitted the last point added.
  uint64_t query_locked(bool last_submitted);
  // DRM_IOCTL_SYNCOBJ_EVENTFD: 1 is added to the eventfd `fd` (the emulator's hold on it)
  // once `point` is signalled, or once it exists with `available_only`; also when the point is
  // submitted later. Dropped unsignalled with the syncobj, as drm_syncobj_free() does.
  void add_eventfd_locked(std::shared_ptr<EventfdRef> fd, uint64_t point, bool available_only);
  size_t pending_eventfds_locked() const { return eventfds_.size(); }
  // Registers `w` on what a wait for `point` of `s` depends on: the syncobj (a point submitted or
  // replaced) and, once the point exists, its unsignaled fences.
  static void subscribe_locked(Waiter &w, const std::shared_ptr<Syncobj> &s, uint64_t point);

 private:
  struct EventfdEntry {
    std::shared_ptr<EventfdRef> fd;
    uint64_t point;
    bool available_only;
  };
  // syncobj_eventfd_entry_func(): false while the point has no fence yet.
  bool try_fire_locked(const EventfdEntry &e) const;
  void run_eventfds_locked();
  struct Point {
    uint64_t value;  // 0 for a binary fence
    std::shared_ptr<Fence> fence;
  };
  void prune_locked();

  std::vector<Point> points_;
  uint64_t signaled_floor_ = 0;  // points at or below it were pruned after signaling
  std::vector<EventfdEntry> eventfds_;
  WaitQueue waiters_;
};

}  // namespace rvgl::emu
