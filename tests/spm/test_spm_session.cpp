// SpmSession on its own: the contract between its worker and the context that owns it.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <new>
#include <thread>

#include "amdgpu/amdgpu_device.h"
#include "amdgpu/kept_room.h"
#include "amdgpu/render_node.h"
#include "spm/spm_reaper.h"
#include "spm/spm_session.h"
#include "rvgl_emu.h"
#include "support/replaced_new.h"
#include "support/scoped_knob.h"

using namespace rvgl;
using namespace std::chrono_literals;

namespace {

// Whether this thread's allocations fail: a test's way to run out of memory inside the code it
// calls, on its own thread only. The emulated kernel's own allocations still succeed.
thread_local bool t_out_of_memory = false;

}  // namespace

// This program's allocations (support/replaced_new.h).
void *rvgl::test::replaced_allocate(std::size_t n, std::size_t align) noexcept {
  if (t_out_of_memory && !rvgl_emu_thread_in_kernel()) return nullptr;
  return malloc_aligned(n, align);
}

TEST_CASE("SPM callbacks once cut never call back into their old owner", "[spm][session]") {
  SpmReaper::instance().drain();  // no SPM left held by an earlier test
  int err = 0;
  auto dev = AmdgpuDevice::open(choose_render_node(""), &err);
  REQUIRE(dev);
  std::atomic<bool> in_done{false}, let_go{false}, detached{false}, late_call{false};
  // The owner's completion is slow (a response write racing a context teardown); the owner cuts
  // the link meanwhile and then goes away. Its callbacks must not run after cut() returned.
  auto done = [&](uint32_t, uint32_t, const rvgl_rsp_spm_set_dest &) {
    in_done = true;
    while (!let_go)
      std::this_thread::sleep_for(1ms);
  };
  auto signalled = [&] {
    if (detached) late_call = true;
  };
  auto link = std::make_shared<SpmCallbacks>(done, signalled);
  std::unique_ptr<SpmSession> s;
  REQUIRE(SpmSession::create(dev, 0, 7, link, &s) == 0);
  REQUIRE(s->set_dest({}, 0, 1, RVGL_RSP_NONE) == 0);  // a stop: returns from the kernel at once
  for (int i = 0; i < 5000 && !in_done; ++i)
    std::this_thread::sleep_for(1ms);
  REQUIRE(in_done);
  std::thread owner([&] {
    link->cut();
    detached = true;
  });
  std::this_thread::sleep_for(100ms);  // a cut() that does not wait has returned by now
  let_go = true;
  owner.join();
  s.reset();
  CHECK_FALSE(late_call);
}

namespace {

// A device file of its own and an SPM session on it (no SPM left held by an earlier test).
struct SessionOnDevice {
  std::shared_ptr<AmdgpuDevice> dev;
  std::shared_ptr<SpmCallbacks> link = std::make_shared<SpmCallbacks>(nullptr, nullptr);
  std::unique_ptr<SpmSession> s;
  SessionOnDevice() {
    SpmReaper::instance().drain();
    int err = 0;
    dev = AmdgpuDevice::open(choose_render_node(""), &err);
    REQUIRE(dev);
    REQUIRE(SpmSession::create(dev, 0, 7, link, &s) == 0);
  }
};

// A SET_DEST of `dst`, waited for.
void set_dest_and_wait(SpmSession &s, SpmSession::Destination dst, uint32_t seqno) {
  const uint64_t before = s.completed();
  REQUIRE(s.set_dest(std::move(dst), 0, seqno, RVGL_RSP_NONE) == 0);
  for (int i = 0; i < 5000 && s.completed() == before; ++i)
    std::this_thread::sleep_for(1ms);
  REQUIRE(s.completed() == before + 1);
}

// A SET_DEST of a fresh 64 KiB host buffer, with RVGL_EMU_FAIL set to `fail_rule` meanwhile,
// waited for; what becomes of the buffer is seen through the returned handle.
std::weak_ptr<Mapping> set_bounce_dest(SpmSession &s, uint32_t seqno, const char *fail_rule) {
  constexpr uint32_t kSize = 64 * 1024;
  SpmSession::Destination dst;
  dst.bounce = SpmSession::make_bounce(kSize, Charge());
  REQUIRE(dst.bounce);
  std::weak_ptr<Mapping> buffer = dst.bounce;
  dst.host = dst.bounce->as<uint8_t>();
  dst.size = kSize;
  test::ScopedKnob fail("RVGL_EMU_FAIL", fail_rule, "");
  set_dest_and_wait(s, std::move(dst), seqno);
  return buffer;
}

}  // namespace

TEST_CASE("a destination the kernel failed to let go of stays mapped until the device closes",
          "[spm][session]") {
  // RELEASE failing (three tries) leaves the kernel's stream running into the last destination:
  // freeing it would let the kernel write into whatever the process maps there next.
  SessionOnDevice h;
  const auto bounce = set_bounce_dest(*h.s, 1, "");  // streams from now on
  CHECK(h.dev->kept_until_closed() == 0);
  {
    test::ScopedKnob fail("RVGL_EMU_FAIL", "PROFILER:1+:EIO", "");
    h.s.reset();
  }
  CHECK(h.dev->kept_until_closed() == 1);
  CHECK_FALSE(bounce.expired());
  h.dev.reset();  // the file closes: the kernel stops, and only then the buffer goes
  CHECK(bounce.expired());
}

TEST_CASE("a destination whose SET_DEST failed part way stays mapped until the device closes",
          "[spm][session]") {
  // amdgpu_set_dest_buffer() takes a new destination XCC by XCC; -EFAULT (a retired buffer's
  // header it could not write) ends that loop with the new destination already streaming on the
  // XCCs before. Any other error comes before it takes anything.
  SessionOnDevice h;
  const auto streaming = set_bounce_dest(*h.s, 1, "");
  CHECK(h.dev->kept_until_closed() == 0);
  const auto refused = set_bounce_dest(*h.s, 2, "PROFILER:1:EINVAL");
  CHECK(refused.expired());  // the kernel took nothing: freed at once
  CHECK(h.dev->kept_until_closed() == 0);
  const auto part_way = set_bounce_dest(*h.s, 3, "PROFILER:1:EFAULT");
  CHECK_FALSE(part_way.expired());
  CHECK(h.dev->kept_until_closed() == 1);
  CHECK_FALSE(streaming.expired());  // still the destination the kernel was last given
  h.s.reset();                       // released: the kernel stopped the stream
  CHECK(streaming.expired());
  CHECK_FALSE(part_way.expired());
  h.dev.reset();  // the file closes, and only then the part-way one goes
  CHECK(part_way.expired());
}

TEST_CASE("a session whose kernel does not let go keeps its destination without allocating",
          "[spm][session]") {
  // The destructor cannot report running out of memory (and runs on the reaper): the place it
  // keeps the destination in was made with the SET_DEST. The device's list is filled to its
  // capacity first, so a keep that allocated now would have to grow it.
  SessionOnDevice h;
  const auto streaming = set_bounce_dest(*h.s, 1, "");
  for (int i = 0; i < 3; ++i)
    KeptRoom::make(h.dev, 1).keep(std::make_shared<int>(i));
  REQUIRE(h.dev->kept_until_closed() == 3);
  {
    test::ScopedKnob fail("RVGL_EMU_FAIL", "PROFILER:1+:EIO", "");
    t_out_of_memory = true;
    h.s.reset();
    t_out_of_memory = false;
  }
  CHECK(h.dev->kept_until_closed() == 4);
  CHECK_FALSE(streaming.expired());
  h.dev.reset();
  CHECK(streaming.expired());
}

TEST_CASE("places kept for SPM destinations go back when nothing needed them", "[spm][session]") {
  // Each SET_DEST that names memory holds two places while its memory is the stream's; a long
  // session must not grow the device's reservation without bound.
  SessionOnDevice h;
  for (uint32_t i = 1; i <= 200; ++i) {
    set_bounce_dest(*h.s, i, i % 3 == 0 ? "PROFILER:1:EINVAL" : "");
    CHECK(h.dev->kept_places_reserved() == 2);
  }
  set_dest_and_wait(*h.s, {}, 201);  // stop streaming: nothing to keep
  REQUIRE(h.s->completed() == 201);
  CHECK(h.dev->kept_places_reserved() == 0);
  set_bounce_dest(*h.s, 202, "");
  CHECK(h.dev->kept_places_reserved() == 2);
  h.s.reset();  // released: the stream's memory is free
  CHECK(h.dev->kept_places_reserved() == 0);
  CHECK(h.dev->kept_until_closed() == 0);
}
