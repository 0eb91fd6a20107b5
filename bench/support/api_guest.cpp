#include "api_guest.h"

#include <algorithm>

namespace rvgl::bench {

namespace {

[[noreturn]] void fail(const std::string &what, long code) {
  throw std::runtime_error(what + ": " + std::to_string(code));
}

constexpr uint32_t kSlots = RVGL_RSP_AREA_SIZE / RVGL_MAX_RSP_SIZE;

}  // namespace

ApiGuest::~ApiGuest() {
  for (uint32_t r : resources_)
    virgl_renderer_resource_unref(r);
  if (shmem_res_) virgl_renderer_resource_unref(shmem_res_);
  if (created_) virgl_renderer_context_destroy(ctx_);
}

void ApiGuest::start() {
  uint32_t ver = 0, size = 0;
  virgl_renderer_get_cap_set(RVGL_CAPSET_ID, &ver, &size);
  if (ver != RVGL_CAPSET_VERSION || size != sizeof(rvgl_capset)) fail("no ROCM capset", ver);
  virgl_renderer_fill_caps(RVGL_CAPSET_ID, RVGL_CAPSET_VERSION, &caps_);
  if (int r = virgl_renderer_context_create_with_flags(ctx_, RVGL_CAPSET_ID, 0, "bench"))
    fail("context_create_with_flags", r);
  created_ = true;
  next_va_ = caps_.va_start;
  const uint32_t res = next_res_++;
  if (int r = create_blob(res, VIRGL_RENDERER_BLOB_MEM_HOST3D, RVGL_BLOB_FLAG_USE_MAPPABLE,
                          RVGL_BLOB_ID_SHMEM, RVGL_SHMEM_SIZE))
    fail("shared page blob", r);
  shmem_res_ = res;
  void *p = nullptr;
  uint64_t got = 0;
  if (int r = virgl_renderer_resource_map(res, &p, &got)) fail("map shared page", r);
  shmem_ = static_cast<uint8_t *>(p);
}

int ApiGuest::create_blob(uint32_t res, uint32_t mem, uint32_t flags, uint64_t blob_id,
                          uint64_t size, const iovec *iov, uint32_t num_iovs) {
  virgl_renderer_resource_create_blob_args a{};
  a.res_handle = res;
  a.ctx_id = ctx_;
  a.blob_mem = mem;
  a.blob_flags = flags;
  a.blob_id = blob_id;
  a.size = size;
  a.iovecs = iov;
  a.num_iovs = num_iovs;
  const int r = virgl_renderer_resource_create_blob(&a);
  // As QEMU and vtest do: the creating context holds the new resource.
  if (r == 0) virgl_renderer_ctx_attach_resource(static_cast<int>(ctx_), static_cast<int>(res));
  return r;
}

template <class Rsp, class Req>
Rsp ApiGuest::call(uint32_t cmd, Req req, std::span<const uint8_t> tail) {
  const uint32_t off = (slot_++ % kSlots) * RVGL_MAX_RSP_SIZE;
  const uint32_t seqno = next_seqno();
  const size_t len = sizeof(Req) + tail.size();
  req.hdr = rvgl_req_hdr{cmd, static_cast<uint32_t>(len), seqno, off};
  buf_.resize((len + 3) / 4);
  auto *bytes = reinterpret_cast<uint8_t *>(buf_.data());
  std::memcpy(bytes, &req, sizeof(Req));
  if (!tail.empty()) std::memcpy(bytes + sizeof(Req), tail.data(), tail.size());
  if (int r = virgl_renderer_submit_cmd(buf_.data(), static_cast<int>(ctx_),
                                        static_cast<int>(buf_.size())))
    fail("submit_cmd", r);
  Rsp rsp;
  std::memcpy(&rsp, response(off), sizeof(rsp));
  if (rsp.hdr.seqno != seqno) fail("no response to command", cmd);
  if (rsp.hdr.result) fail("command " + std::to_string(cmd), rsp.hdr.result);
  return rsp;
}

uint64_t ApiGuest::alloc_va(uint64_t size) {
  const uint64_t align = std::max<uint64_t>(caps_.va_alignment, 65536);
  const uint64_t va = (next_va_ + align - 1) / align * align;
  if (va + size > caps_.va_end) fail("out of GPU VA", static_cast<long>(size));
  next_va_ = va + size;
  return va;
}

void ApiGuest::va_map(ApiBuffer &b, uint32_t flags) {
  b.va = alloc_va(b.size);
  rvgl_req_va_map r{};
  r.bo = b.bo;
  r.res_id = b.bo ? 0 : b.res;
  r.va = b.va;
  r.size = b.size;
  r.flags = flags;
  call<rvgl_rsp_va_map>(RVGL_CMD_VA_MAP, r);
}

ApiBuffer ApiGuest::mapped_bo(uint64_t size, uint32_t domain, uint32_t bo_flags,
                              uint32_t va_flags) {
  ApiBuffer b;
  b.size = size;
  rvgl_req_bo_create c{};
  c.size = size;
  c.domain = domain;
  c.flags = bo_flags;
  c.blob_id = ++next_blob_;
  b.bo = call<rvgl_rsp_bo_create>(RVGL_CMD_BO_CREATE, c).bo;
  b.res = next_res_++;
  if (int r =
          create_blob(b.res, VIRGL_RENDERER_BLOB_MEM_HOST3D,
                      RVGL_BLOB_FLAG_USE_MAPPABLE | RVGL_BLOB_FLAG_USE_SHAREABLE, c.blob_id, size))
    fail("claim blob", r);
  resources_.push_back(b.res);
  void *p = nullptr;
  uint64_t got = 0;
  if (int r = virgl_renderer_resource_map(b.res, &p, &got)) fail("resource_map", r);
  b.cpu = static_cast<uint8_t *>(p);
  va_map(b, va_flags);
  return b;
}

ApiBuffer ApiGuest::gpu_bo(uint64_t size, uint32_t domain) {
  ApiBuffer b;
  b.size = size;
  rvgl_req_bo_create c{};
  c.size = size;
  c.domain = domain;
  b.bo = call<rvgl_rsp_bo_create>(RVGL_CMD_BO_CREATE, c).bo;
  va_map(b, RVGL_VA_FLAG_READ | RVGL_VA_FLAG_WRITE);
  return b;
}

uint32_t ApiGuest::userptr_blob(std::span<const iovec> iov, uint64_t size) {
  const uint32_t res = next_res_++;
  if (int r = create_blob(res, VIRGL_RENDERER_BLOB_MEM_GUEST, RVGL_BLOB_FLAG_USERPTR, 0, size,
                          iov.data(), static_cast<uint32_t>(iov.size())))
    fail("userptr blob", r);
  resources_.push_back(res);
  return res;
}

void ApiGuest::unref(uint32_t res) {
  virgl_renderer_resource_unref(res);
  std::erase(resources_, res);
}

uint32_t ApiGuest::queue_create(uint32_t ip, uint32_t ring_idx) {
  rvgl_req_queue_create r{};
  r.kind = RVGL_QUEUE_KIND_KERNEL;
  r.ip = ip;
  r.ring_idx = ring_idx;
  return call<rvgl_rsp_queue_create>(RVGL_CMD_QUEUE_CREATE, r).queue;
}

uint64_t ApiGuest::submit(uint32_t queue, uint64_t ib_va, uint32_t dwords) {
  rvgl_req_submit r{};
  r.queue = queue;
  r.num_ibs = 1;
  const rvgl_ib ib{ib_va, dwords * 4, 0};
  return call<rvgl_rsp_submit>(
             RVGL_CMD_SUBMIT, r,
             std::span<const uint8_t>(reinterpret_cast<const uint8_t *>(&ib), sizeof(ib)))
      .seq;
}

void ApiGuest::fence(uint32_t ring_idx, uint64_t fence_id) {
  if (int r = virgl_renderer_context_create_fence(ctx_, VIRGL_RENDERER_FENCE_FLAG_MERGEABLE,
                                                  ring_idx, fence_id))
    fail("context_create_fence", r);
}

int ApiGuest::submit_raw(std::span<const uint8_t> bytes) {
  buf_.resize((bytes.size() + 3) / 4);
  std::memcpy(buf_.data(), bytes.data(), bytes.size());
  return virgl_renderer_submit_cmd(buf_.data(), static_cast<int>(ctx_),
                                   static_cast<int>(buf_.size()));
}

}  // namespace rvgl::bench
