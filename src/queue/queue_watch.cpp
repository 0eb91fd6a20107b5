#include "queue/queue_watch.h"

#include "util/monotonic_clock.h"

namespace rvgl {

uint64_t QueueWatch::arm_point() {
  const SyncTimeline &tl = *queue_->timeline();
  const uint64_t known = tl.known_reached();
  const uint64_t last = queue_->last_submitted();
  if (retired() && last <= known) return 0;  // nothing more will be submitted to it
  uint64_t arm = last > known ? last : known + 1;
  if (const uint64_t fenced = delivery_.first_pending_point(&tl); fenced > known && fenced < arm)
    arm = fenced;
  return arm;
}

void QueueWatch::reached(uint64_t point) {
  const int64_t now = monotonic_ns();
  const bool due = !retired() && health_.completed(handle_, *queue_, point, now);
  // A check due now runs before the point is made known (a fence created now on the VMM's
  // thread retires inline once it is), so a guest that gets the fence of a failed job and asks
  // QUEUE_STATE finds it classified. A job that wrote its user fence ran to its end and carries
  // no error: its fences go first and the check right after, on this thread.
  const bool after = due && queue_->finished(point);
  if (due && !after) health_.check(now);
  queue_->timeline()->note_reached(point);
  delivery_.progress();
  if (after) health_.check(now);
}

bool QueueWatch::reached_early(uint64_t point) {
  if (!reached_here(point, monotonic_ns(), {.ran_to_end = true})) return false;
  delivery_.progress();
  return true;
}

bool QueueWatch::reached_here(uint64_t point, int64_t now, QueueHealth::Known known) {
  if (!retired() && !health_.completed_later(handle_, *queue_, point, now, known)) return false;
  queue_->timeline()->note_reached(point);
  return true;  // the caller's poll delivers what waited for it
}

}  // namespace rvgl
