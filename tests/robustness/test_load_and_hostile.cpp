// Issue 7: many contexts and queues submitting concurrently with random destroys; a hostile
// context probing other contexts' names and ranges.
#include <catch2/catch.hpp>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "robustness/robust_support.h"

using namespace rvgl;
using namespace rvgl::test;
namespace pk = rvgl::packets;

namespace {

constexpr uint64_t kPage = 4096;

// Catch2 2.x supports no assertion off the main thread (a failure there calls std::terminate):
// the worker threads record what failed here, and the test asserts on it after joining them.
class Failures {
 public:
  void add(std::string what) {
    std::lock_guard lk(mu_);
    if (list_.size() < kKept) list_.push_back(std::move(what));
    any_.store(true, std::memory_order_relaxed);
  }
  bool any() const { return any_.load(std::memory_order_relaxed); }
  std::vector<std::string> list() const {
    std::lock_guard lk(mu_);
    return list_;
  }

 private:
  static constexpr size_t kKept = 20;
  mutable std::mutex mu_;
  std::vector<std::string> list_;
  std::atomic<bool> any_{false};
};

// In a worker: true when `expr` holds, else records it (with the guest's context) and is false.
#define WORKER_CHECK(g, expr) ((expr) ? true : ((g).fail(__LINE__, #expr), false))

// One guest context with its own queues, driven by one thread (the VMM calls a context from one
// thread at a time; different contexts run on different threads here).
struct LoadGuest {
  Failures *failures = nullptr;
  std::unique_ptr<ContextHarness> h;
  ContextHarness::HostBuffer data, ib;
  std::vector<uint32_t> queues;
  uint64_t va = 0;
  uint64_t next_fence = 1;
  uint64_t fences_created = 0;
  struct Made {
    uint32_t ring;
    uint64_t point;  // the submission's seq on its queue
  };
  std::map<uint64_t, Made> made;  // fence id -> what it waits for

  void fail(int line, const char *what) {
    failures->add("test_load_and_hostile.cpp:" + std::to_string(line) + ": ctx " +
                  std::to_string(h ? h->ctx().ctx_id() : 0) + ": " + what);
  }
  bool start(uint32_t ctx_id, uint32_t nqueues) {
    h = std::make_unique<ContextHarness>(test_config(), (ctx_id & 1) != 0, ctx_id);
    h->create_shmem();
    va = h->capset().va_start;
    data = h->mapped_bo(16 * kPage);
    ib = h->mapped_bo(16 * kPage);
    if (!WORKER_CHECK(*this, h->va_map(data.bo, 0, 0, va, 16 * kPage) == 0)) return false;
    if (!WORKER_CHECK(*this, h->va_map(ib.bo, 0, 0, va + (1 << 24), 16 * kPage) == 0)) return false;
    queues.clear();
    for (uint32_t i = 0; i < nqueues; ++i) {
      int32_t r;
      queues.push_back(h->queue_create(i % 2 ? RVGL_IP_SDMA : RVGL_IP_COMPUTE, 1 + i, &r));
      if (!WORKER_CHECK(*this, r == 0)) return false;
    }
    return true;
  }
  // What the VMM's callback received, checked: each fence exactly once, only fences that were
  // made, on their own ring, in order per ring. Returns how many.
  uint64_t delivered_checked() {
    const auto log = h->fences().snapshot();
    std::set<uint64_t> seen;
    std::map<uint32_t, uint64_t> last_on_ring;
    for (const auto &f : log) {
      const auto it = made.find(f.id);
      if (!WORKER_CHECK(*this, it != made.end())) break;
      if (!WORKER_CHECK(*this, it->second.ring == f.ring)) break;
      if (!WORKER_CHECK(*this, seen.insert(f.id).second)) break;
      if (!WORKER_CHECK(*this, last_on_ring[f.ring] < f.id)) break;  // ids grow along each ring
      last_on_ring[f.ring] = f.id;
    }
    return log.size();
  }
  // Every fence made and never delivered, as "ctx C ring R fence F point P" (the first few).
  std::string missing() {
    std::set<uint64_t> seen;
    for (const auto &f : h->fences().snapshot())
      seen.insert(f.id);
    std::string out;
    size_t n = 0;
    for (const auto &[id, m] : made)
      if (!seen.count(id) && n++ < 4)
        out += (out.empty() ? "" : "; ") + std::string("ctx ") + std::to_string(h->ctx().ctx_id()) +
               " ring " + std::to_string(m.ring) + " fence " + std::to_string(id) + " point " +
               std::to_string(m.point);
    if (n > 4) out += "; " + std::to_string(n - 4) + " more";
    return out;
  }
  // Destroys the context; returns the fences its callback received before.
  uint64_t stop() {
    const uint64_t retired = delivered_checked();
    h.reset();
    data = {};
    ib = {};
    made.clear();
    fences_created = 0;
    return retired;
  }
  // A guest keeps a bounded amount of work in flight (as a real one waits on its fences): the
  // backlog, and with it the drain below, stays bounded however fast the loop runs.
  static constexpr uint64_t kMaxInFlight = 64;
  enum class Step { kSubmitted, kWaiting, kFailed };
  Step step(std::mt19937 &rng) {
    if (fences_created - h->fences().size() >= kMaxInFlight) {
      if (!(h->ctx().ctx_id() & 1)) h->ctx().poll();
      return Step::kWaiting;
    }
    const uint32_t qi = rng() % queues.size();
    std::vector<uint32_t> dw;
    const uint64_t slot = va + (rng() % 1024) * 4;
    if (qi % 2) {
      pk::sdma_fence(dw, slot, static_cast<uint32_t>(rng()));
      pk::sdma_pad(dw);
    } else {
      pk::pm4_write_data(dw, slot, {static_cast<uint32_t>(rng())});
    }
    int32_t r;
    const uint64_t seq = h->submit(
        queues[qi], {ContextHarness::write_ib(ib, va + (1 << 24), dw, (qi * 4 + rng() % 4) * 1024)},
        {}, &r);
    if (!WORKER_CHECK(*this, r == 0)) return Step::kFailed;
    made[next_fence] = {1 + qi, seq};
    if (!WORKER_CHECK(*this, h->fence(1 + qi, next_fence++) == 0)) return Step::kFailed;
    ++fences_created;
    return Step::kSubmitted;
  }
};

// Poll mode: hands on what woke the context's poll fd, as a VMM's loop does (the engine hears of
// a delegated completion, a failed job's included, only through poll()).
void pump(ContextHarness &h) {
  pollfd p{h.ctx().poll_fd(), POLLIN, 0};
  if (::poll(&p, 1, 0) > 0) h.ctx().poll();
}

}  // namespace

TEST_CASE("load: 32 contexts x 4 queues, concurrent submits, random destroys", "[robust][load]") {
  const auto base = emu_counters();
  ScopedKnob latency("RVGL_EMU_JOB_LATENCY_US", "200");
  const char *env = std::getenv("RVGL_SOAK_SECONDS");  // opt-in longer soak
  const int seconds = env ? std::atoi(env) : 3;
  constexpr uint32_t kThreads = 4, kPerThread = 8, kQueues = 4;
  Failures failures;
  // What the guests created, and what the VMM's callback received (the harness's fence logs),
  // for the contexts that lived to the end and for those destroyed with work in flight.
  std::atomic<uint64_t> created{0}, retired{0}, destroyed_created{0}, destroyed_retired{0},
      destroys{0};
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);
      std::vector<LoadGuest> guests(kPerThread);
      uint32_t next_id = 1000 * (t + 1);
      for (auto &g : guests) {
        g.failures = &failures;
        if (!g.start(next_id++, kQueues)) return;
      }
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
      while (std::chrono::steady_clock::now() < end && !failures.any()) {
        LoadGuest &g = guests[rng() % kPerThread];
        const LoadGuest::Step s = g.step(rng);
        if (s == LoadGuest::Step::kFailed) break;
        if (s == LoadGuest::Step::kWaiting) {
          std::this_thread::yield();
          continue;
        }
        if (rng() % 400 == 0) {  // a guest goes away mid-flight and comes back
          const uint64_t made = g.fences_created;
          destroyed_created += made;
          destroyed_retired += g.stop();  // at most `made`: only fences that were made, once
          ++destroys;
          if (!g.start(next_id++, kQueues)) break;
        }
        // Deliver polled fences of the non-async guests now and then.
        if (rng() % 16 == 0)
          for (auto &x : guests)
            if (!(x.h->ctx().ctx_id() & 1)) x.h->ctx().poll();
      }
      // Drain: every remaining fence must reach the VMM's callback, each exactly once, within
      // the deadline; one that does not is named.
      for (auto &g : guests) {
        if (!g.h) continue;  // its start failed (recorded)
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (g.h->fences().size() < g.fences_created &&
               std::chrono::steady_clock::now() < deadline) {
          if (!(g.h->ctx().ctx_id() & 1)) g.h->ctx().poll();
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        const std::string missing = g.missing();
        if (!missing.empty()) g.fail(__LINE__, ("not retired within 10 s: " + missing).c_str());
        created += g.fences_created;
        retired += g.stop();
      }
    });
  }
  for (auto &t : threads)
    t.join();
  for (const std::string &f : failures.list())
    FAIL_CHECK(f);
  REQUIRE_FALSE(failures.any());
  std::printf(
      "load: %u contexts x %u queues, %d s, %llu fences, %llu retired by the contexts that "
      "lived, %llu of %llu by the %llu destroyed mid-flight\n",
      kThreads * kPerThread, kQueues, seconds,
      static_cast<unsigned long long>(created.load() + destroyed_created.load()),
      static_cast<unsigned long long>(retired.load()),
      static_cast<unsigned long long>(destroyed_retired.load()),
      static_cast<unsigned long long>(destroyed_created.load()),
      static_cast<unsigned long long>(destroys.load()));
  CHECK(created.load() + destroyed_created.load() > 1000);
  // Every fence a surviving guest created reached the VMM's callback (counted from the callback's
  // log, not from what the guest made); a destroyed context's callbacks stop with it.
  CHECK(retired.load() == created.load());
  CHECK(destroyed_retired.load() <= destroyed_created.load());
  CHECK(wait_for([&] { return emu_counters().bos_alive == base.bos_alive; }, 10000));
  CHECK(wait_for([&] { return emu_counters().syncobjs_alive == base.syncobjs_alive; }, 10000));
  CHECK(emu_counters().contexts_alive == base.contexts_alive);
  CHECK(emu_counters().device_files_open == base.device_files_open);
}

TEST_CASE("a hostile context cannot reach another context's objects, queues or memory",
          "[robust][isolation]") {
  ContextHarness victim(test_config(), false, 1), attacker(test_config(), false, 2);
  victim.create_shmem();
  attacker.create_shmem();
  auto secret = victim.mapped_bo(kPage);
  std::memset(secret.ptr(), 0x5e, kPage);
  int32_t r;
  const uint32_t vq = victim.queue_create(RVGL_IP_COMPUTE, 1, &r);
  REQUIRE(r == 0);
  const uint64_t va = victim.capset().va_start;
  REQUIRE(victim.va_map(secret.bo, 0, 0, va, kPage) == 0);

  // Every handle value the victim could own, and the victim's resource ids, by name.
  uint32_t refused = 0, tried = 0;
  for (uint32_t h = 0; h < 64; ++h) {
    tried += 3;
    refused += attacker.va_map(h, 0, 0, va, kPage) < 0;  // -ENOENT, or -EINVAL for 0
    refused += attacker.bo_free(h) == -ENOENT;
    refused += attacker.queue_state(h).hdr.result == -ENOENT;
  }
  for (uint32_t res = 0; res < 64; ++res) {
    ++tried;
    refused += attacker.va_map(0, res, 0, va, kPage) < 0;
  }
  CHECK(refused == tried);
  // The victim's blob ids cannot be claimed from the attacker.
  BlobArgs claim;
  claim.res_id = 999;
  claim.blob_mem = RVGL_BLOB_MEM_HOST3D;
  claim.blob_flags = RVGL_BLOB_FLAG_USE_MAPPABLE;
  claim.blob_id = 1;
  claim.size = kPage;
  BlobExport e;
  CHECK(attacker.ctx().create_blob(claim, &e) == -ENOENT);

  // The same VA in the attacker's own VM reads its own (absent) memory: the copy faults.
  auto ib = attacker.mapped_bo(kPage);
  auto loot = attacker.mapped_bo(kPage);
  REQUIRE(attacker.va_map(ib.bo, 0, 0, va + (1 << 24), kPage) == 0);
  REQUIRE(attacker.va_map(loot.bo, 0, 0, va + (1 << 25), kPage) == 0);
  const uint32_t aq = attacker.queue_create(RVGL_IP_SDMA, 1, &r);
  REQUIRE(r == 0);
  std::vector<uint32_t> dw;
  pk::sdma_copy_linear(dw, va + (1 << 25), va, kPage);
  pk::sdma_pad(dw);
  attacker.submit(aq, {ContextHarness::write_ib(ib, va + (1 << 24), dw)}, {}, &r);
  REQUIRE(r == 0);
  REQUIRE(attacker.fence(1, 1) == 0);
  REQUIRE(attacker.wait_fence(1, 1));
  // Not one byte of the victim's page reached the attacker's.
  CHECK(std::all_of(loot.ptr(), loot.ptr() + kPage, [](uint8_t b) { return b == 0; }));
  // The fault stopped the job (the suite's vm_fault_stop=2): lost, published after its records.
  REQUIRE(wait_for([&] {
    pump(attacker);
    return attacker.queue_state(aq).state == RVGL_QUEUE_STATE_LOST;
  }));
  const auto ast = attacker.queue_state(aq);
  CHECK(ast.flags == (RVGL_QUEUE_FLAG_GUILTY | RVGL_QUEUE_FLAG_VM_FAULT));
  CHECK(ast.error == -ETIME);

  // Out-of-range offsets and sizes against its own objects are refused too.
  CHECK(attacker.va_map(loot.bo, 0, kPage, va + (1 << 26), kPage) == -EINVAL);
  CHECK(attacker.va_map(loot.bo, 0, 0, va + (1 << 26), 2 * kPage) == -EINVAL);
  CHECK(attacker.va_map(loot.bo, 0, 0, attacker.capset().va_end, kPage) == -ERANGE);

  // The victim is untouched and still works: a copy of its own within its page's VM.
  auto vib = victim.mapped_bo(kPage);
  auto vdst = victim.mapped_bo(kPage);
  REQUIRE(victim.va_map(vib.bo, 0, 0, va + (1 << 24), kPage) == 0);
  REQUIRE(victim.va_map(vdst.bo, 0, 0, va + (1 << 25), kPage) == 0);
  const uint32_t vsdma = victim.queue_create(RVGL_IP_SDMA, 2, &r);
  REQUIRE(r == 0);
  dw.clear();
  pk::sdma_copy_linear(dw, va + (1 << 25), va, kPage);
  pk::sdma_pad(dw);
  victim.submit(vsdma, {ContextHarness::write_ib(vib, va + (1 << 24), dw)}, {}, &r);
  REQUIRE(r == 0);
  REQUIRE(victim.fence(2, 1) == 0);
  REQUIRE(victim.wait_fence(2, 1));
  CHECK(std::all_of(vdst.ptr(), vdst.ptr() + kPage, [](uint8_t b) { return b == 0x5e; }));
  CHECK(std::all_of(secret.ptr(), secret.ptr() + kPage, [](uint8_t b) { return b == 0x5e; }));
  // Each context's health owner has looked at its work and has nothing scheduled: every record
  // either will ever get is in its ring (see test_events.cpp, settle()).
  for (ContextHarness *h : {&attacker, &victim})
    REQUIRE(wait_for([&] {
      pump(*h);
      return h->ctx().health().checks() > 0 &&
             const_cast<QueueHealth &>(h->ctx().health()).deadline_ns() == 0;
    }));
  // The victim's queues work on. The one made before the fault hears of the GPU reset that
  // ended the attacker's halted job (the kernel's timeout handler: emu/README.md), innocent, as
  // every context on the GPU would; nothing else reaches the victim. The attacker hears exactly
  // its own fault and the guilty reset it cost.
  for (const uint32_t q : {vq, vsdma}) {
    const auto st = victim.queue_state(q);
    CHECK(st.state == RVGL_QUEUE_STATE_OK);
    CHECK(st.flags == (q == vq ? RVGL_QUEUE_FLAG_INNOCENT : 0u));
  }
  CHECK(victim.shmem_header().event_wptr == 1);
  CHECK(victim.shmem_header().event_overflow == 0);
  const auto vev = read_events(victim);
  REQUIRE(vev.size() == 1);
  CHECK(vev[0].type == RVGL_EVENT_QUEUE_RESET);
  CHECK(vev[0].queue == vq);
  CHECK(vev[0].payload[0] == RVGL_EVENT_RESET_INNOCENT);
  CHECK(attacker.shmem_header().event_wptr == 2);
  const auto ev = read_events(attacker);
  REQUIRE(ev.size() == 2);
  CHECK(ev[0].type == RVGL_EVENT_VM_FAULT);
  CHECK(ev[0].queue == aq);
  CHECK((ev[0].payload[0] & ~0xfffull) == (va & ~0xfffull));
  CHECK(ev[1].type == RVGL_EVENT_QUEUE_RESET);
  CHECK(ev[1].queue == aq);
  CHECK(ev[1].payload[0] == RVGL_EVENT_RESET_GUILTY);
}
