// Drives a ComputeContext the way a guest does: encoded requests into submit_cmd, responses read
// from the shared page, blobs mapped through the fds the VMM would get, fences through the same
// callback/poll paths a VMM uses.
#pragma once

#include <poll.h>
#include <sys/mman.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

#include "context/compute_context.h"
#include "support/product_scope.h"
#include "support/stream_builder.h"
#include "util/mapping.h"

namespace rvgl::test {

struct RetiredFence {
  uint32_t ring;
  uint64_t id;
  std::thread::id thread;
  std::chrono::steady_clock::time_point when;
};

// Collects retired fences from either delivery mode.
class FenceLog {
 public:
  void record(uint32_t ring, uint64_t id) {
    TestCallback test_code;
    std::lock_guard lk(mu_);
    log_.push_back({ring, id, std::this_thread::get_id(), std::chrono::steady_clock::now()});
    cv_.notify_all();
  }
  std::vector<RetiredFence> snapshot() const {
    std::lock_guard lk(mu_);
    return log_;
  }
  size_t size() const {
    std::lock_guard lk(mu_);
    return log_.size();
  }
  bool has(uint32_t ring, uint64_t id) const {
    std::lock_guard lk(mu_);
    for (const auto &f : log_)
      if (f.ring == ring && f.id == id) return true;
    return false;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<RetiredFence> log_;
};

inline Config test_config() {
  Config c;
  c.render_node = "/dev/dri/renderD128";
  // fuzz/make_corpus.py records the suites' real command streams this way.
  if (const char *dir = std::getenv("RVGL_CAPTURE_DIR")) c.capture_dir = dir;
  return c;
}

// ComputeContext::create failed: the VMM got `err`.
struct ContextCreateError : std::runtime_error {
  explicit ContextCreateError(int e)
      : std::runtime_error("context create failed: " + std::to_string(e)), err(e) {}
  int err;
};

class ContextHarness {
 public:
  // drm_fd: what a VMM's get_drm_fd would give (none: the configured node).
  explicit ContextHarness(Config cfg = test_config(), bool async = false, uint32_t ctx_id = 1,
                          UniqueFd drm_fd = UniqueFd())
      : cfg_(std::move(cfg)), async_(async) {
    ComputeContext::Options o;
    o.ctx_id = ctx_id;
    o.drm_fd = std::move(drm_fd);
    o.config = &cfg_;
    o.async_fences = async;
    o.on_fence = [log = log_](uint32_t ring, uint64_t id) { log->record(ring, id); };
    int err = 0;
    try {
      ProductCall product("ComputeContext::create");
      ctx_.reset(ComputeContext::create(std::move(o), &err).release());
    } catch (const std::bad_alloc &) {
      err = -ENOMEM;  // what the router makes of it (Router::create_our_context)
    }
    if (!ctx_) throw ContextCreateError(err);
  }

  ComputeContext &ctx() { return *ctx_; }
  const rvgl_capset &capset() const { return ctx_->capset(); }
  FenceLog &fences() { return *log_; }
  uint32_t next_res_id() { return next_res_++; }

  // Creates and maps the shared page (res id returned).
  uint32_t create_shmem() {
    uint32_t res_id = 0;
    if (try_create_shmem(&res_id)) throw std::runtime_error("shmem");
    return res_id;
  }
  // The same, with the context's errno returned rather than thrown (only the test's own mapping
  // of the page throws).
  int try_create_shmem(uint32_t *res_id) {
    const uint32_t res = next_res_id();
    BlobExport e;
    if (int err = create_blob(res, RVGL_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_MAPPABLE, 0,
                              RVGL_SHMEM_SIZE, &e))
      return err;
    shmem_ = Mapping::map_shared(e.fd.get(), RVGL_SHMEM_SIZE, PROT_READ | PROT_WRITE);
    if (!shmem_.valid()) throw std::runtime_error("shmem map");
    *res_id = res;
    return 0;
  }
  // The VMM's resource_create_blob of res_id: the context's errno; *out is what the VMM keeps.
  int create_blob(uint32_t res_id, uint32_t blob_mem, uint32_t flags, uint64_t blob_id,
                  uint64_t size, BlobExport *out, std::span<const iovec> iov = {}) {
    BlobArgs a;
    a.res_id = res_id;
    a.blob_mem = blob_mem;
    a.blob_flags = flags;
    a.blob_id = blob_id;
    a.size = size;
    a.iov = iov;
    try {
      ProductCall product("create_blob");
      return ctx_->create_blob(a, out);
    } catch (const std::bad_alloc &) {
      return -ENOMEM;  // what the C API's guard makes of it (vrend-hooks/api_guard.h)
    }
  }
  // The VMM's detach of res_id (its resource unref or detach).
  void detach(uint32_t res_id) {
    ProductCall product("detach_resource");
    ctx_->detach_resource(res_id);
  }
  uint8_t *shmem() const { return shmem_.as<uint8_t>(); }
  const rvgl_shmem_header &shmem_header() const { return *shmem_.as<rvgl_shmem_header>(); }

  // Sends one request and returns its response (result in hdr.result).
  template <class Rsp, class Req>
  Rsp call(uint32_t cmd, Req req, std::span<const uint8_t> tail = {}) {
    const uint32_t off = (slot_++ % 256) * RVGL_MAX_RSP_SIZE;
    const uint32_t seqno = ++seqno_;
    std::vector<uint8_t> buf(sizeof(Req) + tail.size());
    req.hdr = rvgl_req_hdr{cmd, static_cast<uint32_t>(buf.size()), seqno, off};
    std::memcpy(buf.data(), &req, sizeof(Req));
    if (!tail.empty()) std::memcpy(buf.data() + sizeof(Req), tail.data(), tail.size());
    {
      ProductCall product("submit_cmd");
      last_submit_ = ctx_->submit_cmd(buf);
    }
    Rsp rsp;
    std::memcpy(&rsp, shmem() + RVGL_RSP_AREA_OFFSET + off, sizeof(rsp));
    if (last_submit_ == 0 && rsp.hdr.seqno != seqno) throw std::runtime_error("no response");
    return rsp;
  }
  int last_submit() const { return last_submit_; }
  uint32_t next_seqno() { return ++seqno_; }

  // ---- typed helpers; each returns the result through *result when given ----
  uint32_t bo_create(uint64_t size, uint32_t domain, uint32_t flags = 0, uint64_t blob_id = 0,
                     int32_t *result = nullptr) {
    rvgl_req_bo_create r{};
    r.size = size;
    r.domain = domain;
    r.flags = flags;
    r.blob_id = blob_id;
    auto rsp = call<rvgl_rsp_bo_create>(RVGL_CMD_BO_CREATE, r);
    if (result) *result = rsp.hdr.result;
    return rsp.hdr.result ? 0 : rsp.bo;
  }
  int32_t bo_free(uint32_t bo) {
    rvgl_req_bo_free r{};
    r.bo = bo;
    return call<rvgl_rsp_bo_free>(RVGL_CMD_BO_FREE, r).hdr.result;
  }
  int32_t va_map(uint32_t bo, uint32_t res_id, uint64_t offset, uint64_t va, uint64_t size,
                 uint32_t flags = RVGL_VA_FLAG_READ | RVGL_VA_FLAG_WRITE) {
    rvgl_req_va_map r{};
    r.bo = bo;
    r.res_id = res_id;
    r.offset = offset;
    r.va = va;
    r.size = size;
    r.flags = flags;
    return call<rvgl_rsp_va_map>(RVGL_CMD_VA_MAP, r).hdr.result;
  }
  int32_t va_unmap(uint64_t va, uint64_t size) {
    rvgl_req_va_unmap r{};
    r.va = va;
    r.size = size;
    return call<rvgl_rsp_va_unmap>(RVGL_CMD_VA_UNMAP, r).hdr.result;
  }
  uint32_t queue_create(uint32_t ip, uint32_t ring_idx, int32_t *result = nullptr,
                        uint32_t priority = RVGL_PRIORITY_NORMAL) {
    rvgl_req_queue_create r{};
    r.kind = RVGL_QUEUE_KIND_KERNEL;
    r.ip = ip;
    r.priority = priority;
    r.ring_idx = ring_idx;
    auto rsp = call<rvgl_rsp_queue_create>(RVGL_CMD_QUEUE_CREATE, r);
    if (result) *result = rsp.hdr.result;
    return rsp.hdr.result ? 0 : rsp.queue;
  }
  int32_t queue_destroy(uint32_t queue) {
    rvgl_req_queue_destroy r{};
    r.queue = queue;
    return call<rvgl_rsp_queue_destroy>(RVGL_CMD_QUEUE_DESTROY, r).hdr.result;
  }
  rvgl_rsp_queue_state queue_state(uint32_t queue) {
    rvgl_req_queue_state r{};
    r.queue = queue;
    return call<rvgl_rsp_queue_state>(RVGL_CMD_QUEUE_STATE, r);
  }
  // One SUBMIT; returns the seq or 0 (result through *result).
  uint64_t submit(uint32_t queue, std::vector<rvgl_ib> ibs, std::vector<rvgl_wait> waits = {},
                  int32_t *result = nullptr) {
    rvgl_req_submit r{};
    r.queue = queue;
    r.num_ibs = static_cast<uint32_t>(ibs.size());
    r.num_waits = static_cast<uint32_t>(waits.size());
    std::vector<uint8_t> tail(ibs.size() * sizeof(rvgl_ib) + waits.size() * sizeof(rvgl_wait));
    if (!ibs.empty()) std::memcpy(tail.data(), ibs.data(), ibs.size() * sizeof(rvgl_ib));
    if (!waits.empty())
      std::memcpy(tail.data() + ibs.size() * sizeof(rvgl_ib), waits.data(),
                  waits.size() * sizeof(rvgl_wait));
    auto rsp = call<rvgl_rsp_submit>(RVGL_CMD_SUBMIT, r, tail);
    if (result) *result = rsp.hdr.result;
    return rsp.hdr.result ? 0 : rsp.seq;
  }

  // A CPU-visible GTT buffer: BO + blob claim + mapping of the dma-buf the VMM would get.
  struct HostBuffer {
    uint32_t bo = 0;
    uint32_t res_id = 0;
    uint64_t size = 0;
    Mapping map;
    template <class T = uint8_t>
    T *ptr() const {
      return map.as<T>();
    }
  };
  HostBuffer mapped_bo(uint64_t size, uint32_t domain = RVGL_DOMAIN_GTT, uint32_t flags = 0) {
    HostBuffer b;
    const uint64_t blob_id = ++next_blob_;
    int32_t r;
    b.bo = bo_create(size, domain, flags, blob_id, &r);
    if (r) throw std::runtime_error("bo_create " + std::to_string(r));
    b.res_id = next_res_id();
    BlobExport e;
    if (int err = create_blob(b.res_id, RVGL_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_MAPPABLE, blob_id,
                              size, &e))
      throw std::runtime_error("claim " + std::to_string(err));
    b.map = Mapping::map_shared(e.fd.get(), size, PROT_READ | PROT_WRITE);
    if (!b.map.valid()) throw std::runtime_error("map blob");
    b.size = size;
    return b;
  }

  // Copies dwords into a mapped buffer and returns the IB descriptor for GPU VA `va`.
  static rvgl_ib write_ib(HostBuffer &buf, uint64_t va, const std::vector<uint32_t> &dw,
                          uint64_t offset = 0) {
    std::memcpy(buf.ptr() + offset, dw.data(), dw.size() * 4);
    return rvgl_ib{va + offset, static_cast<uint32_t>(dw.size() * 4), 0};
  }

  // Fences: create, then wait for delivery through the mode in use.
  int fence(uint32_t ring, uint64_t id, bool mergeable = false) {
    try {
      ProductCall product("create_fence");
      return ctx_->create_fence(ring, id, mergeable);
    } catch (const std::bad_alloc &) {
      return -ENOMEM;  // as the C API's guard answers
    }
  }
  bool wait_fence(uint32_t ring, uint64_t id, int timeout_ms = 5000) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!log_->has(ring, id)) {
      if (std::chrono::steady_clock::now() > end) return false;
      if (!async_) {
        pollfd p{ctx_->poll_fd(), POLLIN, 0};
        if (::poll(&p, 1, 10) > 0) {
          ProductCall product("poll");
          ctx_->poll();
        }
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    return true;
  }

 private:
  Config cfg_;
  bool async_;
  std::shared_ptr<FenceLog> log_ = std::make_shared<FenceLog>();
  // The context's end is a product call too (its destroy).
  struct DestroyContext {
    void operator()(ComputeContext *c) const {
      ProductCall product("context destroy");
      delete c;
    }
  };
  std::unique_ptr<ComputeContext, DestroyContext> ctx_;
  Mapping shmem_;
  uint32_t seqno_ = 0;
  uint32_t slot_ = 0;
  uint32_t next_res_ = 1;
  uint64_t next_blob_ = 0;
  int last_submit_ = 0;
};

}  // namespace rvgl::test
