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
  queue_->timeline()->note_reached(point);
  if (!retired()) {
    // Health first: a guest that gets the fence and asks QUEUE_STATE sees what this check found.
    health_.completed(handle_, monotonic_ns());
  }
  delivery_.progress();
}

}  // namespace rvgl
