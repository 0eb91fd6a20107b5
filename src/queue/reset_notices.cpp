#include "queue/reset_notices.h"

#include <algorithm>

namespace rvgl {

ResetNotices &ResetNotices::process() {
  static ResetNotices *n = new ResetNotices;  // never destroyed: contexts may outlive statics
  return *n;
}

void ResetNotices::join(ResetListener *l) {
  std::lock_guard lk(mu_);
  members_.push_back(l);
}

void ResetNotices::leave(ResetListener *l) {
  std::lock_guard lk(mu_);
  std::erase(members_, l);
}

void ResetNotices::tell_others(const ResetListener *from) {
  // Under mu_ throughout, so a listener that leaves waits until it is no longer being told.
  std::lock_guard lk(mu_);
  for (ResetListener *l : members_)
    if (l != from) l->reset_elsewhere();
}

}  // namespace rvgl
