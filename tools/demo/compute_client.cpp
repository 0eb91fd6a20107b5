#include "compute_client.h"

#include <cerrno>
#include <cstring>
#include <thread>

namespace rvgl::demo {

namespace {

uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

}  // namespace

Result<std::unique_ptr<ComputeClient>> ComputeClient::connect(const std::string &socket_path,
                                                              const ClientOptions &options) {
  guest::VtestOptions vo;
  vo.client_name = options.client_name;
  vo.reply_timeout = options.timeout;
  const auto give_up = std::chrono::steady_clock::now() + options.connect_retry;
  auto t = guest::VtestTransport::connect(socket_path, vo);
  while (!t && (t.code() == -ECONNREFUSED || t.code() == -ENOENT) &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    t = guest::VtestTransport::connect(socket_path, vo);
  }
  if (!t) return t.error();
  guest::VtestTransport *raw = t->get();
  guest::SessionOptions so;
  so.timeout = options.timeout;
  auto s = guest::Session::open(std::move(*t), so);
  if (!s) return s.error();
  std::unique_ptr<ComputeClient> c(new ComputeClient(raw, std::move(*s)));
  c->next_va_ = c->capset().va_start;
  return c;
}

Result<GpuBuffer> ComputeClient::create_buffer(uint64_t size, uint32_t domain, uint32_t bo_flags) {
  GpuBuffer b;
  b.size = size;
  const uint64_t blob_id = ++next_blob_id_;
  auto bo = session_->call<rvgl_rsp_bo_create>([&](guest::RequestEncoder &e) {
    return e.bo_create({size, 0, domain, bo_flags, blob_id});
  });
  if (!bo) return bo.error();
  b.bo = bo->bo;
  guest::BlobParams p;
  p.blob_mem = RVGL_BLOB_MEM_HOST3D;
  p.blob_flags = RVGL_BLOB_FLAG_USE_MAPPABLE | RVGL_BLOB_FLAG_USE_SHAREABLE;
  p.blob_id = blob_id;
  p.size = size;
  auto blob = transport_->create_blob(p);
  if (!blob) return blob.error();
  b.blob = std::move(*blob);
  if (auto s = transport_->map_blob(b.blob); !s) return s.error();
  return b;
}

Result<GpuBuffer> ComputeClient::create_userptr(uint64_t size, std::span<const uint8_t> init,
                                                bool read_only) {
  GpuBuffer b;
  b.size = size;
  std::vector<uint8_t> copy(init.begin(), init.end());  // BlobParams wants mutable bytes
  guest::BlobParams p;
  p.blob_mem = RVGL_BLOB_MEM_GUEST;
  p.blob_flags = RVGL_BLOB_FLAG_USERPTR | (read_only ? RVGL_BLOB_FLAG_USERPTR_RDONLY : 0u);
  p.size = size;
  p.guest_memory = copy;
  auto blob = transport_->create_blob(p);
  if (!blob) return blob.error();
  b.blob = std::move(*blob);
  return b;
}

Status ComputeClient::map_gpu(GpuBuffer &buf, uint32_t va_flags) {
  const uint64_t align = capset().va_alignment ? capset().va_alignment : 4096;
  const uint64_t va = align_up(next_va_, align);
  const uint64_t size = align_up(buf.size, align);
  if (va + size > capset().va_end) return guest::make_error(-ENOSPC, "demo: out of GPU VA");
  auto r = session_->call<rvgl_rsp_va_map>([&](guest::RequestEncoder &e) {
    guest::VaMapArgs a;
    a.object =
        buf.bo ? guest::ObjectRef::handle(buf.bo) : guest::ObjectRef::resource(buf.blob.res_id);
    a.va = va;
    a.size = size;
    a.flags = va_flags;
    return e.va_map(a);
  });
  if (!r) return r.error();
  buf.va = va;
  next_va_ = va + size;
  return {};
}

Status ComputeClient::release(GpuBuffer &&buf) {
  GpuBuffer gone = std::move(buf);
  if (gone.bo) {
    auto r = session_->call<rvgl_rsp_bo_free>(
        [&](guest::RequestEncoder &e) { return e.bo_free(gone.bo); });
    if (!r) return r.error();
  }
  return transport_->unref_blob(std::move(gone.blob));
}

Result<uint32_t> ComputeClient::create_queue(uint32_t ip, uint32_t ring_idx) {
  auto r = session_->call<rvgl_rsp_queue_create>([&](guest::RequestEncoder &e) {
    guest::KernelQueueArgs a;
    a.ip = ip;
    a.ring_idx = ring_idx;
    return e.queue_create(a);
  });
  if (!r) return r.error();
  return r->queue;
}

Result<uint64_t> ComputeClient::submit(uint32_t queue, GpuBuffer &ib_buf, uint64_t offset,
                                       const std::vector<uint32_t> &ib,
                                       std::span<const rvgl_wait> waits) {
  const uint64_t bytes = ib.size() * 4;
  if (!ib_buf.va || offset % 4 || offset > ib_buf.size || bytes > ib_buf.size - offset)
    return guest::make_error(-EINVAL, "demo: IB does not fit its buffer");
  std::memcpy(ib_buf.memory().data() + offset, ib.data(), bytes);
  const rvgl_ib desc{ib_buf.va + offset, static_cast<uint32_t>(bytes), 0};
  auto r = session_->call<rvgl_rsp_submit>([&](guest::RequestEncoder &e) {
    return e.submit(queue, {&desc, 1}, waits);
  });
  if (!r) return r.error();
  return r->seq;
}

Result<guest::Fence> ComputeClient::fence(uint32_t ring_idx) {
  guest::SubmitParams p;  // no commands: only the fence, after what the ring already holds
  p.ring_idx = ring_idx;
  p.want_fence = true;
  return transport_->submit(p);
}

Result<bool> ComputeClient::wait(const guest::Fence &f, std::chrono::milliseconds timeout) {
  return transport_->wait(f, timeout);
}

}  // namespace rvgl::demo
