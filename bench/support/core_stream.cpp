#include "core_stream.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace rvgl::bench {

namespace {

constexpr uint32_t kSlots = RVGL_RSP_AREA_SIZE / RVGL_MAX_RSP_SIZE;

}  // namespace

const char *small_request_name(SmallRequest r) {
  switch (r) {
    case SmallRequest::kNop:
      return "NOP";
    case SmallRequest::kQueryUsage:
      return "QUERY_INFO(USAGE)";
    case SmallRequest::kQueryMemory:
      return "QUERY_INFO(MEMORY)";
  }
  return "?";
}

CoreContext::CoreContext() {
  cfg_.render_node = "/dev/dri/renderD128";
  ComputeContext::Options o;
  o.ctx_id = 1;
  o.config = &cfg_;
  o.on_fence = [](uint32_t, uint64_t) {};
  int err = 0;
  ctx_ = ComputeContext::create(std::move(o), &err);
  if (!ctx_) throw std::runtime_error("context: " + std::to_string(err));
  BlobArgs a;
  a.res_id = 1;
  a.blob_mem = RVGL_BLOB_MEM_HOST3D;
  a.blob_flags = RVGL_BLOB_FLAG_USE_MAPPABLE;
  a.size = RVGL_SHMEM_SIZE;
  BlobExport e;
  if (int r = ctx_->create_blob(a, &e))
    throw std::runtime_error("shared page: " + std::to_string(r));
  shmem_ = Mapping::map_shared(e.fd.get(), RVGL_SHMEM_SIZE, PROT_READ | PROT_WRITE);
  if (!shmem_.valid()) throw std::runtime_error("shared page map");
}

void CoreContext::build(SmallRequest kind, uint32_t n) {
  stream_.clear();
  offsets_.clear();
  for (uint32_t i = 0; i < n; ++i) {
    offsets_.push_back(stream_.size());
    const uint32_t off = (i % kSlots) * RVGL_MAX_RSP_SIZE;
    if (kind == SmallRequest::kNop) {
      rvgl_req_nop r{};
      r.hdr = {RVGL_CMD_NOP, sizeof(r), 0, off};
      stream_.insert(stream_.end(), reinterpret_cast<uint8_t *>(&r),
                     reinterpret_cast<uint8_t *>(&r) + sizeof(r));
    } else {
      rvgl_req_query_info r{};
      r.hdr = {RVGL_CMD_QUERY_INFO, sizeof(r), 0, off};
      r.query = kind == SmallRequest::kQueryUsage ? RVGL_INFO_USAGE : RVGL_INFO_MEMORY;
      stream_.insert(stream_.end(), reinterpret_cast<uint8_t *>(&r),
                     reinterpret_cast<uint8_t *>(&r) + sizeof(r));
    }
  }
  renumber();
}

void CoreContext::renumber() {
  for (size_t at : offsets_) {
    const uint32_t s = ++seqno_;
    std::memcpy(stream_.data() + at + offsetof(rvgl_req_hdr, seqno), &s, sizeof(s));
  }
}

bool CoreContext::all_answered_ok() const {
  // The last kSlots requests still own their slots; each must carry its seqno and result 0.
  const auto *area = shmem_.as<uint8_t>() + RVGL_RSP_AREA_OFFSET;
  const size_t n = offsets_.size();
  for (size_t i = n > kSlots ? n - kSlots : 0; i < n; ++i) {
    rvgl_req_hdr req;
    std::memcpy(&req, stream_.data() + offsets_[i], sizeof(req));
    rvgl_rsp_hdr rsp;
    std::memcpy(&rsp, area + req.rsp_off, sizeof(rsp));
    if (rsp.seqno != req.seqno || rsp.result != 0) return false;
  }
  return true;
}

}  // namespace rvgl::bench
