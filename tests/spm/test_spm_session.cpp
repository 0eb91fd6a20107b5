// SpmSession on its own: the contract between its worker and the context that owns it.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "amdgpu/amdgpu_device.h"
#include "amdgpu/render_node.h"
#include "spm/spm_reaper.h"
#include "spm/spm_session.h"
#include "support/scoped_knob.h"

using namespace rvgl;
using namespace std::chrono_literals;

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

TEST_CASE("a destination the kernel failed to let go of stays mapped until the device closes",
          "[spm][session]") {
  // RELEASE failing (three tries) leaves the kernel's stream running into the last destination:
  // freeing it would let the kernel write into whatever the process maps there next.
  SpmReaper::instance().drain();
  int err = 0;
  auto dev = AmdgpuDevice::open(choose_render_node(""), &err);
  REQUIRE(dev);
  auto link = std::make_shared<SpmCallbacks>(nullptr, nullptr);
  std::unique_ptr<SpmSession> s;
  REQUIRE(SpmSession::create(dev, 0, 7, link, &s) == 0);
  constexpr uint32_t kSize = 64 * 1024;
  SpmSession::Destination dst;
  dst.bounce = SpmSession::make_bounce(kSize, Charge());
  REQUIRE(dst.bounce);
  std::weak_ptr<Mapping> bounce = dst.bounce;
  dst.host = dst.bounce->as<uint8_t>();
  dst.size = kSize;
  REQUIRE(s->set_dest(std::move(dst), 0, 1, RVGL_RSP_NONE) == 0);  // streams from now on
  for (int i = 0; i < 5000 && s->completed() < 1; ++i)
    std::this_thread::sleep_for(1ms);
  REQUIRE(s->completed() == 1);
  CHECK(dev->kept_until_closed() == 0);
  {
    test::ScopedKnob fail("RVGL_EMU_FAIL", "PROFILER:1+:EIO", "");
    s.reset();
  }
  CHECK(dev->kept_until_closed() == 1);
  CHECK_FALSE(bounce.expired());
  dev.reset();  // the file closes: the kernel stops, and only then the buffer goes
  CHECK(bounce.expired());
}

TEST_CASE("a destination whose SET_DEST failed part way stays mapped until the device closes",
          "[spm][session]") {
  // amdgpu_set_dest_buffer() takes a new destination XCC by XCC; -EFAULT (a retired buffer's
  // header it could not write) ends that loop with the new destination already streaming on the
  // XCCs before. Any other error comes before it takes anything.
  SpmReaper::instance().drain();
  int err = 0;
  auto dev = AmdgpuDevice::open(choose_render_node(""), &err);
  REQUIRE(dev);
  auto link = std::make_shared<SpmCallbacks>(nullptr, nullptr);
  std::unique_ptr<SpmSession> s;
  REQUIRE(SpmSession::create(dev, 0, 7, link, &s) == 0);
  constexpr uint32_t kSize = 64 * 1024;
  uint32_t seqno = 0;
  // A SET_DEST of a fresh buffer, waited for; what becomes of the buffer is seen through the
  // returned handle.
  const auto set_dest = [&](const char *fail_rule) {
    SpmSession::Destination dst;
    dst.bounce = SpmSession::make_bounce(kSize, Charge());
    REQUIRE(dst.bounce);
    std::weak_ptr<Mapping> buffer = dst.bounce;
    dst.host = dst.bounce->as<uint8_t>();
    dst.size = kSize;
    test::ScopedKnob fail("RVGL_EMU_FAIL", fail_rule, "");
    const uint64_t before = s->completed();
    REQUIRE(s->set_dest(std::move(dst), 0, ++seqno, RVGL_RSP_NONE) == 0);
    for (int i = 0; i < 5000 && s->completed() == before; ++i)
      std::this_thread::sleep_for(1ms);
    REQUIRE(s->completed() == before + 1);
    return buffer;
  };
  const auto streaming = set_dest("");
  CHECK(dev->kept_until_closed() == 0);
  const auto refused = set_dest("PROFILER:1:EINVAL");
  CHECK(refused.expired());  // the kernel took nothing: freed at once
  CHECK(dev->kept_until_closed() == 0);
  const auto part_way = set_dest("PROFILER:1:EFAULT");
  CHECK_FALSE(part_way.expired());
  CHECK(dev->kept_until_closed() == 1);
  CHECK_FALSE(streaming.expired());  // still the destination the kernel was last given
  s.reset();                         // released: the kernel stopped the stream
  CHECK(streaming.expired());
  CHECK_FALSE(part_way.expired());
  dev.reset();  // the file closes, and only then the part-way one goes
  CHECK(part_way.expired());
}
