// The allocation sweep at the C API (issue 13, point 6): what robustness/alloc_sweep.cpp does to
// one context, done through the public virglrenderer functions a VMM calls, so the router's own
// paths (context and resource tables, blob claims, fences, teardown) meet a failed allocation too.
// A guest's life — context, shared page, a BO claimed as a blob and mapped, a userptr blob, a
// queue, an SDMA copy and its fence, then unref of every resource and the context's destroy — runs
// once clean and then once per allocation the library makes on the VMM's thread, that one refused
// (then that one and every later one). Every run must end with the copy done or the VMM or guest
// told with ENOMEM; every fence the VMM made retires; and afterwards the library holds nothing of
// the run (its resource ids and context unknown, the emulated kernel's objects and the process's
// descriptors as before), whichever allocation failed, teardown's included: unref and destroy
// have no error to give, so they must not stop half way.
#include <catch2/catch.hpp>

#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "../../tools/common/amd_packets.h"
#include "guest_pages.h"
#include "renderer_fixture.h"
#include "robustness/alloc_failure.h"
#include "rocm_virgl_protocol.h"
#include "rvgl_emu.h"
#include "support/open_fds.h"
#include "support/product_scope.h"

using namespace rvgl::hooks_test;
namespace alloc = rvgl::test::alloc;
namespace pk = rvgl::packets;
using rvgl::test::ProductCall;

namespace {

constexpr uint64_t kSize = 64 * 1024;
constexpr uint32_t kRing = 1;

// What must be as it was after every run.
struct Held {
  uint64_t bos = 0, userptrs = 0, contexts = 0, files = 0, syncobjs = 0;
  size_t fds = 0;
  static Held now() {
    rvgl_emu_counters c{};
    rvgl_emu_get_counters(&c, sizeof c);
    return {c.bos_alive,         c.userptr_alive,  c.contexts_alive,
            c.device_files_open, c.syncobjs_alive, rvgl::test::open_fd_count()};
  }
  // Now, once the process's descriptors are back to `base`'s number or 2 s have passed: when a
  // queue goes while the engine's registration of its eventfd waits on a job's fence, the
  // emulator keeps a descriptor of that eventfd (the kernel holds the file without one:
  // emu/README.md, SYNCOBJ_EVENTFD) until its interrupt signals the fence, which may come just
  // after the run has returned.
  static Held settled(const Held &base) {
    Held h = now();
    for (int ms = 0; ms < 2000 && h.fds != base.fds; ++ms) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      h = now();
    }
    return h;
  }
  std::string differs(const Held &o) const {
    std::string s;
    auto add = [&](const char *what, uint64_t a, uint64_t b) {
      if (a != b)
        s += std::string(what) + " " + std::to_string(a) + " -> " + std::to_string(b) + "; ";
    };
    add("BOs", bos, o.bos);
    add("userptr BOs", userptrs, o.userptrs);
    add("kernel contexts", contexts, o.contexts);
    add("device files", files, o.files);
    add("syncobjs", syncobjs, o.syncobjs);
    add("descriptors", fds, o.fds);
    return s;
  }
};

struct Outcome {
  bool copied = false;
  std::vector<std::string> told;  // every failure the VMM or the guest saw, with its value
  bool only_enomem = true;        // every one of them ENOMEM
  std::vector<std::string> unretired;
  std::vector<std::string> left;  // resource ids or the context still known afterwards
};

// One guest's life through the C API; every call into the library is marked (product_scope.h).
class ApiRun {
 public:
  ApiRun(Renderer &r, uint64_t va, uint32_t ctx, uint32_t first_res)
      : r_(r), va_(va), ctx_(ctx), next_res_(first_res) {}

  Outcome run() {
    userptrs_at_start_ = Held::now().userptrs;
    life();
    teardown();
    for (const uint32_t res : made_) {
      uint32_t info = 0;
      if (virgl_renderer_resource_get_map_info(res, &info) != -EINVAL)
        o_.left.push_back("resource " + std::to_string(res));
    }
    if (created_ && virgl_renderer_context_create_fence(ctx_, 0, 0, 99) != -EINVAL)
      o_.left.push_back("context " + std::to_string(ctx_));
    return o_;
  }

 private:
  // A non-zero result the VMM or the guest got: false.
  bool ok(const char *what, int r) {
    if (r == 0) return true;
    o_.told.push_back(std::string(what) + " " + std::to_string(r));
    if (r != ENOMEM && r != -ENOMEM) o_.only_enomem = false;
    return false;
  }

  int create_blob(uint32_t res, uint32_t blob_mem, uint32_t flags, uint64_t blob_id,
                  const iovec *iov, uint32_t num_iovs) {
    virgl_renderer_resource_create_blob_args a{};
    a.res_handle = res;
    a.ctx_id = ctx_;
    a.blob_mem = blob_mem;
    a.blob_flags = flags;
    a.blob_id = blob_id;
    a.size = blob_mem == VIRGL_RENDERER_BLOB_MEM_HOST3D && blob_id == RVGL_BLOB_ID_SHMEM
                 ? RVGL_SHMEM_SIZE
                 : kSize;
    a.iovecs = iov;
    a.num_iovs = num_iovs;
    made_.push_back(res);  // looked at afterwards whether or not it was made
    int r;
    {
      ProductCall pc("virgl_renderer_resource_create_blob");
      r = virgl_renderer_resource_create_blob(&a);
    }
    if (r == 0) {
      ProductCall pc("virgl_renderer_ctx_attach_resource");
      virgl_renderer_ctx_attach_resource(static_cast<int>(ctx_), static_cast<int>(res));
    }
    return r;
  }

  int map(uint32_t res, void **p) {
    uint64_t size = 0;
    int r;
    {
      ProductCall pc("virgl_renderer_resource_map");
      r = virgl_renderer_resource_map(res, p, &size);
    }
    if (r == 0) mapped_.push_back(res);
    return r;
  }

  // One request; its result (the submit's own if that failed, else the response's).
  template <class Rsp, class Req>
  int32_t call(uint32_t cmd, Req req, Rsp *rsp, const std::vector<uint8_t> &tail = {}) {
    const uint32_t off = (slot_++ % 128) * RVGL_MAX_RSP_SIZE;
    const uint32_t seqno = ++seqno_;
    std::vector<uint32_t> dw((sizeof(Req) + tail.size() + 3) / 4);
    req.hdr = rvgl_req_hdr{cmd, static_cast<uint32_t>(sizeof(Req) + tail.size()), seqno, off};
    std::memcpy(dw.data(), &req, sizeof(Req));
    if (!tail.empty())
      std::memcpy(reinterpret_cast<uint8_t *>(dw.data()) + sizeof(Req), tail.data(), tail.size());
    int r;
    {
      ProductCall pc("virgl_renderer_submit_cmd");
      r = virgl_renderer_submit_cmd(dw.data(), static_cast<int>(ctx_), static_cast<int>(dw.size()));
    }
    if (r) return r;
    std::memcpy(rsp, shmem_ + RVGL_RSP_AREA_OFFSET + off, sizeof(*rsp));
    if (rsp->hdr.seqno != seqno) return -EPROTO;  // no response: a failure of its own
    return rsp->hdr.result;
  }

  bool wait_fence(uint64_t id) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!r_.fences().has(ctx_, kRing, id)) {
      if (std::chrono::steady_clock::now() > end) return false;
      if (r_.async()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      int fd;
      {
        ProductCall pc("virgl_renderer_context_get_poll_fd");
        fd = virgl_renderer_context_get_poll_fd(ctx_);
      }
      if (fd >= 0) {
        pollfd p{fd, POLLIN, 0};
        ::poll(&p, 1, 5);
      }
      ProductCall pc("virgl_renderer_context_poll");
      virgl_renderer_context_poll(ctx_);
    }
    return true;
  }

 public:
  // The real library's blob of this run: made, or refused; the VMM forgets a refused id (QEMU
  // frees its own record and never unrefs it), so the real library must not hold it then.
  // Asked after the run, with nothing refused: 0 when that id is free, else the failure.
  std::string real_id_after_refusal() {
    if (!real_refused_) return "";
    const int r = create_real_blob(real_res_);
    if (r != 0)
      return "resource " + std::to_string(real_res_) + " still the real library's (" +
             std::to_string(r) + ")";
    ProductCall pc("virgl_renderer_resource_unref");
    virgl_renderer_resource_unref(real_res_);
    return "";
  }

 private:
  // A GUEST blob without USERPTR: a plain resource of the real library, no context's.
  int create_real_blob(uint32_t res) {
    iovec iov{real_pages_.ptr, kSize};
    virgl_renderer_resource_create_blob_args a{};
    a.res_handle = res;
    a.blob_mem = VIRGL_RENDERER_BLOB_MEM_GUEST;
    a.size = kSize;
    a.iovecs = &iov;
    a.num_iovs = 1;
    ProductCall pc("virgl_renderer_resource_create_blob");
    return virgl_renderer_resource_create_blob(&a);
  }

  void life() {
    int r;
    real_res_ = next_res_++;
    r = create_real_blob(real_res_);
    if (r == 0) made_.push_back(real_res_);
    real_refused_ = r != 0;
    if (!ok("real library blob", r)) return;
    {
      ProductCall pc("virgl_renderer_context_create_with_flags");
      r = virgl_renderer_context_create_with_flags(ctx_, RVGL_CAPSET_ID, 4, "rocm");
    }
    if (!ok("context_create", r)) return;
    created_ = true;
    shmem_res_ = next_res_++;
    void *page = nullptr;
    if (!ok("shared page blob",
            create_blob(shmem_res_, VIRGL_RENDERER_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_MAPPABLE,
                        RVGL_BLOB_ID_SHMEM, nullptr, 0)) ||
        !ok("shared page map", map(shmem_res_, &page)))
      return;
    shmem_ = static_cast<uint8_t *>(page);

    rvgl_req_bo_create bc{};
    bc.size = kSize;
    bc.domain = RVGL_DOMAIN_GTT;
    bc.blob_id = 1;
    rvgl_rsp_bo_create bo_rsp{};
    if (!ok("BO_CREATE", call(RVGL_CMD_BO_CREATE, bc, &bo_rsp))) return;
    const uint32_t bo_res = next_res_++;
    void *bo_cpu = nullptr;
    if (!ok("BO blob", create_blob(bo_res, VIRGL_RENDERER_BLOB_MEM_HOST3D,
                                   RVGL_BLOB_FLAG_USE_MAPPABLE | RVGL_BLOB_FLAG_USE_SHAREABLE, 1,
                                   nullptr, 0)) ||
        !ok("BO map", map(bo_res, &bo_cpu)))
      return;
    auto *dst = static_cast<uint8_t *>(bo_cpu);

    auto *src32 = reinterpret_cast<uint32_t *>(pages_.ptr);
    std::iota(src32, src32 + kSize / 4, 0x77770000u);
    iovec iov{pages_.ptr, kSize};
    const uint64_t userptrs_before = Held::now().userptrs;
    const uint32_t src_res = next_res_++;
    if (!ok("userptr blob", create_blob(src_res, VIRGL_RENDERER_BLOB_MEM_GUEST,
                                        RVGL_BLOB_FLAG_USERPTR, 0, &iov, 1)))
      return;

    const uint64_t src_va = va_, dst_va = va_ + kSize;
    rvgl_req_va_map m{};
    rvgl_rsp_va_map m_rsp{};
    m.res_id = src_res;
    m.va = src_va;
    m.size = kSize;
    m.flags = RVGL_VA_FLAG_READ;
    if (!ok("VA_MAP userptr", call(RVGL_CMD_VA_MAP, m, &m_rsp))) return;
    m = {};
    m.bo = bo_rsp.bo;
    m.va = dst_va;
    m.size = kSize;
    m.flags = RVGL_VA_FLAG_READ | RVGL_VA_FLAG_WRITE | RVGL_VA_FLAG_EXECUTE;
    if (!ok("VA_MAP BO", call(RVGL_CMD_VA_MAP, m, &m_rsp))) return;

    rvgl_req_queue_create qc{};
    qc.kind = RVGL_QUEUE_KIND_KERNEL;
    qc.ip = RVGL_IP_SDMA;
    qc.ring_idx = kRing;
    rvgl_rsp_queue_create q_rsp{};
    if (!ok("QUEUE_CREATE", call(RVGL_CMD_QUEUE_CREATE, qc, &q_rsp))) return;

    // The IB in the BO's last page, copying the userptr's pages before it over the BO's start.
    constexpr uint64_t kIbOffset = kSize - 4096;
    std::vector<uint32_t> ib;
    pk::sdma_copy_linear(ib, dst_va, src_va, static_cast<uint32_t>(kIbOffset));
    pk::sdma_pad(ib);
    std::memcpy(dst + kIbOffset, ib.data(), ib.size() * 4);
    rvgl_req_submit s{};
    s.queue = q_rsp.queue;
    s.num_ibs = 1;
    const rvgl_ib one{dst_va + kIbOffset, static_cast<uint32_t>(ib.size() * 4), 0};
    std::vector<uint8_t> tail(sizeof(one));
    std::memcpy(tail.data(), &one, sizeof(one));
    rvgl_rsp_submit s_rsp{};
    const bool submitted = ok("SUBMIT", call(RVGL_CMD_SUBMIT, s, &s_rsp, tail));
    // The VMM makes the guest's fence whether or not the submit worked; once made it retires.
    int fr;
    {
      ProductCall pc("virgl_renderer_context_create_fence");
      fr = virgl_renderer_context_create_fence(ctx_, VIRGL_RENDERER_FENCE_FLAG_MERGEABLE, kRing, 1);
    }
    if (ok("create_fence", fr) && !wait_fence(1)) o_.unretired.push_back("ring 1 fence 1");
    if (!submitted || !o_.unretired.empty()) return;
    o_.copied = std::memcmp(dst, pages_.ptr, kIbOffset) == 0;

    // What QEMU does next: the BO exported (a dma-buf the VMM closes), then the userptr blob's
    // iovecs taken back before its unref, every use of the pages revoked first.
    uint32_t fd_type = 0;
    int fd = -1;
    {
      ProductCall pc("virgl_renderer_resource_export_blob");
      r = virgl_renderer_resource_export_blob(bo_res, &fd_type, &fd);
    }
    if (ok("export_blob", r)) close(fd);
    iovec *back = nullptr;
    int n = -1;
    {
      ProductCall pc("virgl_renderer_resource_detach_iov");
      virgl_renderer_resource_detach_iov(static_cast<int>(src_res), &back, &n);
    }
    if (back != &iov || n != 1) o_.left.push_back("the userptr blob's iovecs, not given back");
    if (Held::now().userptrs != userptrs_before)
      o_.left.push_back("the userptr pages, still in use after detach_iov");
  }

  void teardown() {
    for (const uint32_t res : mapped_) {
      ProductCall pc("virgl_renderer_resource_unmap");
      virgl_renderer_resource_unmap(res);
    }
    for (const uint32_t res : made_) {
      ProductCall pc("virgl_renderer_resource_unref");
      virgl_renderer_resource_unref(res);
    }
    // Every use of the guest's pages ends with the unref, before the context goes.
    if (Held::now().userptrs != userptrs_at_start_)
      o_.left.push_back("the userptr pages, still in use after unref");
    if (created_) {
      ProductCall pc("virgl_renderer_context_destroy");
      virgl_renderer_context_destroy(ctx_);
    }
  }

  Renderer &r_;
  uint64_t va_;
  uint32_t ctx_;
  uint32_t next_res_;
  GuestPages pages_{kSize};
  GuestPages real_pages_{kSize};
  uint32_t real_res_ = 0;
  bool real_refused_ = false;
  bool created_ = false;
  uint64_t userptrs_at_start_ = 0;
  uint32_t shmem_res_ = 0;
  uint8_t *shmem_ = nullptr;
  uint32_t seqno_ = 0, slot_ = 0;
  std::vector<uint32_t> made_, mapped_;
  Outcome o_;
};

std::string joined(const std::vector<std::string> &v) {
  std::string s;
  for (const auto &x : v)
    s += (s.empty() ? "" : ", ") + x;
  return s;
}

void api_alloc_sweep(bool async, bool from_then_on) {
  INFO((async ? "ASYNC_FENCE_CB" : "poll mode") << (from_then_on ? ", refused from then on" : ""));
  Renderer::Options o;
  o.flags = VIRGL_RENDERER_NO_VIRGL | VIRGL_RENDERER_THREAD_SYNC;
  if (async) o.flags |= VIRGL_RENDERER_ASYNC_FENCE_CB;
  Renderer r(o);
  REQUIRE(r.result() == 0);
  rvgl_capset caps{};
  virgl_renderer_fill_caps(RVGL_CAPSET_ID, RVGL_CAPSET_VERSION, &caps);
  const uint64_t va = caps.va_start;
  REQUIRE(va != 0);
  uint32_t ctx = 1;
  // A first run warms what the process keeps for good (the capset cache, the completion engine).
  {
    ApiRun warm(r, va, ctx, 100 * ctx);
    REQUIRE(warm.run().copied);
    ++ctx;
  }
  // A context that lives through every run, as another guest's would: the completion engine,
  // and what runs leave in its DRM file, stay (the last context's end would close them).
  constexpr uint32_t kBystander = 999;
  REQUIRE(virgl_renderer_context_create_with_flags(kBystander, RVGL_CAPSET_ID, 9, "bystander") ==
          0);
  const Held base = Held::now();
  uint64_t fewest = UINT64_MAX, most = 0;
  for (int i = 0; i < 5; ++i, ++ctx) {
    ApiRun clean(r, va, ctx, 100 * ctx);
    alloc::Armed counting(0, false);
    const Outcome out = clean.run();
    const alloc::Tally t = counting.tally();
    INFO("clean run " << i << ": told " << joined(out.told));
    REQUIRE(out.copied);
    REQUIRE(out.told.empty());
    REQUIRE(base.differs(Held::settled(base)) == "");
    fewest = std::min(fewest, t.counted);
    most = std::max(most, t.counted);
  }
  REQUIRE(fewest > 0);  // the calls are marked, or the sweep would test nothing

  uint64_t refused = 0, told = 0, copied = 0;
  for (uint64_t n = 1; n <= most; ++n, ++ctx) {
    INFO("allocation " << n << " of " << fewest << "-" << most
                       << (from_then_on ? " and every later one" : "") << " refused");
    rvgl::test::product_call_escaped = nullptr;
    ApiRun run(r, va, ctx, 100 * ctx);
    alloc::Armed refusing(n, from_then_on);
    const Outcome out = run.run();
    const alloc::Tally t = refusing.tally();
    CHECK(run.real_id_after_refusal() == "");
    INFO("told: " << joined(out.told));
    INFO("an exception left " << (rvgl::test::product_call_escaped
                                      ? rvgl::test::product_call_escaped
                                      : "no call"));
    CHECK(rvgl::test::product_call_escaped == nullptr);
    CHECK(joined(out.unretired) == "");
    CHECK(joined(out.left) == "");
    CHECK(base.differs(Held::settled(base)) == "");
    CHECK((out.copied || !out.told.empty()));
    CHECK(out.only_enomem);
    refused += t.failed > 0;
    told += !out.told.empty();
    copied += out.copied;
    if (n <= fewest) CHECK(t.failed > 0);  // every clean run made it
  }
  virgl_renderer_context_destroy(kBystander);
  std::printf(
      "C API allocation sweep (%s%s): %llu-%llu allocations per clean run, %llu refused "
      "in turn; %llu runs told the VMM or guest, %llu copied all the same\n",
      async ? "async callbacks" : "poll mode", from_then_on ? ", from then on" : "",
      static_cast<unsigned long long>(fewest), static_cast<unsigned long long>(most),
      static_cast<unsigned long long>(refused), static_cast<unsigned long long>(told),
      static_cast<unsigned long long>(copied));
}

}  // namespace

TEST_CASE("C API allocation sweep, poll mode", "[hooks][alloc]") {
  api_alloc_sweep(false, false);
  api_alloc_sweep(false, true);
}

TEST_CASE("C API allocation sweep, async fence callbacks", "[hooks][alloc]") {
  api_alloc_sweep(true, false);
  api_alloc_sweep(true, true);
}
