// Who may make a timeline point known (docs/threads.md): a point made known lets a context fence
// retire inline, ahead of the health owner's look at that job. A global fence's work snapshot is
// asked on the VMM's or the router's thread, so its look must make nothing known.
#include <catch2/catch.hpp>

#include "amdgpu/amdgpu_device.h"
#include "amdgpu/render_node.h"
#include "context/work_snapshot.h"
#include "queue/sync_timeline.h"
#include "util/monotonic_clock.h"

using namespace rvgl;

namespace {

struct Timeline {
  std::shared_ptr<AmdgpuDevice> dev;
  std::shared_ptr<SyncTimeline> tl;
};

Timeline make_timeline() {
  int err = 0;
  Timeline t;
  t.dev = AmdgpuDevice::open(choose_render_node(""), &err);
  REQUIRE(t.dev);
  t.tl = SyncTimeline::create(t.dev, &err);
  REQUIRE(t.tl);
  return t;
}

}  // namespace

TEST_CASE("a work snapshot asks the kernel but makes no point known", "[timeline]") {
  auto [dev, tl] = make_timeline();
  WorkSnapshot snap(dev, {{tl, 5}});
  CHECK_FALSE(snap.reached());

  // The GPU's signal, as the kernel records it: not through SyncTimeline::signal, which is the
  // host's own and makes its point known.
  REQUIRE(dev->syncobj_timeline_signal(tl->handle(), 5) == 0);
  CHECK(snap.reached());
  CHECK(tl->known_reached() == 0);
  uint64_t v = 0;
  CHECK(tl->query(&v) == 0);
  CHECK(v == 5);
  CHECK(tl->known_reached() == 0);
  tl->note_reached(v);  // the owner's way: made known
  CHECK(tl->known_reached() == 5);
}

TEST_CASE("a work snapshot's wait makes no point known", "[timeline]") {
  auto [dev, tl] = make_timeline();
  WorkSnapshot snap(dev, {{tl, 3}});
  REQUIRE(dev->syncobj_timeline_signal(tl->handle(), 3) == 0);
  CHECK(snap.wait(monotonic_ns() + 1'000'000'000));
  CHECK(tl->known_reached() == 0);
}
