// Which contexts of the process hear of a device reset one of them found.
//
// A context learns of a reset from its own health checks (its reset probe's answer), and a check
// runs only after its queues completed work or the kernel refused some: an idle context would
// hear of another context's reset — VRAM lost with it — only at its next completion, which may
// never come. So the check that first hears of a reset has every other context of the process
// look at its live queues at its next allowed check (one pacing interval at most); that check's
// own probe then says whether its device was the one reset. A context told of a reset does not
// tell the others again. Cost: one check per context per reset (two ioctls when its device was
// not reset), nothing while there is none.
//
// Threads: join/leave with a context's health owner (VMM thread), tell_others from a check (the
// completion engine's thread). mu_ is taken before any listener's lock, never under one.
#pragma once

#include <mutex>
#include <vector>

namespace rvgl {

class ResetListener {
 public:
  // Another context heard of a device reset. Takes only the listener's own lock and leaf locks;
  // runs no check.
  virtual void reset_elsewhere() = 0;

 protected:
  ~ResetListener() = default;
};

class ResetNotices {
 public:
  static ResetNotices &process();

  void join(ResetListener *l);
  // Once it returns, no notice reaches `l`.
  void leave(ResetListener *l);
  void tell_others(const ResetListener *from);

 private:
  std::mutex mu_;
  std::vector<ResetListener *> members_;
};

}  // namespace rvgl
