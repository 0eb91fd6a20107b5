// A guest of one ROCM context as a VMM relays it, through the public virglrenderer API only:
// blobs by virgl_renderer_resource_create_blob, mappings by virgl_renderer_resource_map, requests
// by virgl_renderer_submit_cmd, responses read from the mapped shared page, fences by
// virgl_renderer_context_create_fence.
#pragma once

#include <sys/uio.h>

#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "rocm_virgl_protocol.h"
#include "virgl_api.h"

namespace rvgl::hooks_test {

class RocmGuest {
 public:
  // res ids are taken from [first_res_id, ...): several guests in one test must not collide.
  RocmGuest(uint32_t ctx_id, uint32_t first_res_id) : ctx_(ctx_id), next_res_(first_res_id) {}

  uint32_t ctx_id() const { return ctx_; }
  // How the VMM relays: virgl_renderer_submit_cmd2 (crosvm's rutabaga) instead of submit_cmd,
  // and what it asks of every new blob (crosvm: export_blob, map_info, an export query).
  void use_submit_cmd2(bool on) { submit_cmd2_ = on; }
  void on_blob(std::function<void(uint32_t res_id)> f) { on_blob_ = std::move(f); }
  uint32_t next_res_id() { return next_res_++; }

  // capset, context and shared page, as a guest starts.
  void start(uint32_t capset_id = RVGL_CAPSET_ID) {
    uint32_t ver = 0, size = 0;
    virgl_renderer_get_cap_set(capset_id, &ver, &size);
    if (ver != RVGL_CAPSET_VERSION || size != sizeof(rvgl_capset))
      throw std::runtime_error("no ROCM capset");
    virgl_renderer_fill_caps(capset_id, RVGL_CAPSET_VERSION, &caps_);
    if (int r = virgl_renderer_context_create_with_flags(ctx_, capset_id, 4, "rocm"))
      throw std::runtime_error("context_create_with_flags: " + std::to_string(r));
    shmem_res_ = next_res_id();
    if (int r = create_blob(shmem_res_, VIRGL_RENDERER_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_MAPPABLE,
                            RVGL_BLOB_ID_SHMEM, RVGL_SHMEM_SIZE))
      throw std::runtime_error("shared page blob: " + std::to_string(r));
    shmem_ = static_cast<uint8_t *>(map(shmem_res_, RVGL_SHMEM_SIZE));
  }

  const rvgl_capset &caps() const { return caps_; }
  uint32_t shmem_res() const { return shmem_res_; }
  const rvgl_shmem_header &shmem_header() const {
    return *reinterpret_cast<const rvgl_shmem_header *>(shmem_);
  }

  int create_blob(uint32_t res_id, uint32_t blob_mem, uint32_t flags, uint64_t blob_id,
                  uint64_t size, const iovec *iov = nullptr, uint32_t num_iovs = 0) {
    virgl_renderer_resource_create_blob_args a{};
    a.res_handle = res_id;
    a.ctx_id = ctx_;
    a.blob_mem = blob_mem;
    a.blob_flags = flags;
    a.blob_id = blob_id;
    a.size = size;
    a.iovecs = iov;
    a.num_iovs = num_iovs;
    const int r = virgl_renderer_resource_create_blob(&a);
    // As QEMU and vtest do once a blob exists: the creating context holds it.
    if (r == 0) {
      virgl_renderer_ctx_attach_resource(static_cast<int>(ctx_), static_cast<int>(res_id));
      if (on_blob_) on_blob_(res_id);
    }
    return r;
  }

  void *map(uint32_t res_id, uint64_t expect_size) {
    void *p = nullptr;
    uint64_t size = 0;
    if (int r = virgl_renderer_resource_map(res_id, &p, &size))
      throw std::runtime_error("resource_map: " + std::to_string(r));
    if (size != expect_size) throw std::runtime_error("resource_map size");
    return p;
  }

  // Sends one request and returns its response.
  template <class Rsp, class Req>
  Rsp call(uint32_t cmd, Req req, const std::vector<uint8_t> &tail = {}) {
    const uint32_t off = (slot_++ % 128) * RVGL_MAX_RSP_SIZE;
    const uint32_t seqno = ++seqno_;
    std::vector<uint8_t> buf(sizeof(Req) + tail.size());
    req.hdr = rvgl_req_hdr{cmd, static_cast<uint32_t>(buf.size()), seqno, off};
    std::memcpy(buf.data(), &req, sizeof(Req));
    if (!tail.empty()) std::memcpy(buf.data() + sizeof(Req), tail.data(), tail.size());
    last_submit_ = submit_raw(buf);
    Rsp rsp;
    std::memcpy(&rsp, shmem_ + RVGL_RSP_AREA_OFFSET + off, sizeof(rsp));
    if (last_submit_ == 0 && rsp.hdr.seqno != seqno) throw std::runtime_error("no response");
    return rsp;
  }
  int submit_raw(const std::vector<uint8_t> &bytes) {
    std::vector<uint32_t> dw((bytes.size() + 3) / 4);
    std::memcpy(dw.data(), bytes.data(), bytes.size());
    if (submit_cmd2_)
      return virgl_renderer_submit_cmd2(dw.data(), static_cast<int>(ctx_),
                                        static_cast<int>(dw.size()), nullptr, 0);
    return virgl_renderer_submit_cmd(dw.data(), static_cast<int>(ctx_),
                                     static_cast<int>(dw.size()));
  }
  int last_submit() const { return last_submit_; }
  // The seqno for a request built by hand (submit_raw): seqnos must increase.
  uint32_t next_seqno() { return ++seqno_; }

  uint32_t bo_create(uint64_t size, uint32_t domain, uint32_t flags, uint64_t blob_id) {
    rvgl_req_bo_create r{};
    r.size = size;
    r.domain = domain;
    r.flags = flags;
    r.blob_id = blob_id;
    auto rsp = call<rvgl_rsp_bo_create>(RVGL_CMD_BO_CREATE, r);
    if (rsp.hdr.result) throw std::runtime_error("BO_CREATE " + std::to_string(rsp.hdr.result));
    return rsp.bo;
  }
  // BO_CREATE parked under a fresh blob_id, claimed as a HOST3D blob; returns {bo, res_id}.
  std::pair<uint32_t, uint32_t> bo_blob(uint64_t size, uint32_t domain, uint32_t bo_flags = 0) {
    const uint64_t blob_id = ++next_blob_;
    const uint32_t bo = bo_create(size, domain, bo_flags, blob_id);
    const uint32_t res = next_res_id();
    if (int r =
            create_blob(res, VIRGL_RENDERER_BLOB_MEM_HOST3D,
                        RVGL_BLOB_FLAG_USE_MAPPABLE | RVGL_BLOB_FLAG_USE_SHAREABLE, blob_id, size))
      throw std::runtime_error("claim blob: " + std::to_string(r));
    return {bo, res};
  }
  int32_t va_map(uint32_t bo, uint32_t res_id, uint64_t va, uint64_t size,
                 uint32_t flags = RVGL_VA_FLAG_READ | RVGL_VA_FLAG_WRITE) {
    rvgl_req_va_map r{};
    r.bo = bo;
    r.res_id = res_id;
    r.va = va;
    r.size = size;
    r.flags = flags;
    return call<rvgl_rsp_va_map>(RVGL_CMD_VA_MAP, r).hdr.result;
  }
  uint32_t queue_create(uint32_t ip, uint32_t ring_idx) {
    rvgl_req_queue_create r{};
    r.kind = RVGL_QUEUE_KIND_KERNEL;
    r.ip = ip;
    r.ring_idx = ring_idx;
    auto rsp = call<rvgl_rsp_queue_create>(RVGL_CMD_QUEUE_CREATE, r);
    if (rsp.hdr.result) throw std::runtime_error("QUEUE_CREATE " + std::to_string(rsp.hdr.result));
    return rsp.queue;
  }
  int32_t queue_destroy(uint32_t queue) {
    rvgl_req_queue_destroy r{};
    r.queue = queue;
    return call<rvgl_rsp_queue_destroy>(RVGL_CMD_QUEUE_DESTROY, r).hdr.result;
  }
  // One IB of `dwords` at `ib_va`, after `waits`; returns the seq.
  uint64_t submit(uint32_t queue, uint64_t ib_va, size_t dwords,
                  const std::vector<rvgl_wait> &waits = {}) {
    rvgl_req_submit r{};
    r.queue = queue;
    r.num_ibs = 1;
    r.num_waits = static_cast<uint32_t>(waits.size());
    const rvgl_ib ib{ib_va, static_cast<uint32_t>(dwords * 4), 0};
    std::vector<uint8_t> tail(sizeof(ib) + waits.size() * sizeof(rvgl_wait));
    std::memcpy(tail.data(), &ib, sizeof(ib));
    if (!waits.empty())
      std::memcpy(tail.data() + sizeof(ib), waits.data(), waits.size() * sizeof(rvgl_wait));
    auto rsp = call<rvgl_rsp_submit>(RVGL_CMD_SUBMIT, r, tail);
    if (rsp.hdr.result) throw std::runtime_error("SUBMIT " + std::to_string(rsp.hdr.result));
    return rsp.seq;
  }
  int fence(uint32_t ring_idx, uint64_t fence_id) {
    return virgl_renderer_context_create_fence(ctx_, VIRGL_RENDERER_FENCE_FLAG_MERGEABLE, ring_idx,
                                               fence_id);
  }

 private:
  uint32_t ctx_;
  uint32_t next_res_;
  uint64_t next_blob_ = 0;
  rvgl_capset caps_{};
  uint32_t shmem_res_ = 0;
  uint8_t *shmem_ = nullptr;  // the VMM's mapping (resource_map), unmapped by resource_unref
  uint32_t seqno_ = 0;
  uint32_t slot_ = 0;
  int last_submit_ = 0;
  bool submit_cmd2_ = false;
  std::function<void(uint32_t)> on_blob_;
};

}  // namespace rvgl::hooks_test
