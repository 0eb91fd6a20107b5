#include "queue/queue_watch.h"

#include "util/monotonic_clock.h"

namespace rvgl {

uint64_t QueueWatch::arm_point() {
  const SyncTimeline &tl = *queue_->timeline();
  const uint64_t known = tl.known_reached();
  const uint64_t last = queue_->last_submitted();
  if (retired() && last <= known) return 0;  // nothing more will be submitted to it
  uint64_t arm = last > known ? last : known + 1;
  if (const uint64_t exact = delivery_.first_exact_point(&tl); exact > known && exact < arm)
    arm = exact;
  return arm;
}

void QueueWatch::reached(uint64_t point) {
  if (!retired()) {
    // Health first, and before the point is made known: a fence created now on the VMM's thread
    // retires inline once the point is known, so a guest that gets it and asks QUEUE_STATE must
    // find what this check found (unless the check is deferred by its interval).
    health_.completed(handle_, point, monotonic_ns());
  }
  queue_->timeline()->note_reached(point);
  delivery_.progress();
}

bool QueueWatch::reached_early(uint64_t point) {
  if (!reached_here(point, monotonic_ns())) return false;
  delivery_.progress();
  return true;
}

bool QueueWatch::reached_here(uint64_t point, int64_t now) {
  if (!retired() && !health_.completed_later(handle_, point, now)) return false;
  queue_->timeline()->note_reached(point);
  return true;  // the caller's poll delivers what waited for it
}

}  // namespace rvgl
