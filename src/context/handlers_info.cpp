// NOP and QUERY_INFO.
#include <cerrno>

#include "context/compute_context.h"

namespace rvgl {

int32_t ComputeContext::cmd_nop(const Request &, Response &) {
  return 0;
}

int32_t ComputeContext::cmd_query_info(const Request &req, Response &rsp) {
  const auto &q = req.as<rvgl_req_query_info>();
  auto &r = rsp.as<rvgl_rsp_query_info>();
  r.query = q.query;
  switch (q.query) {
    case RVGL_INFO_MEMORY: {
      drm_amdgpu_memory_info m{};
      if (int err = dev_->query_info(AMDGPU_INFO_MEMORY, &m, sizeof(m))) return err;
      r.data.memory = {m.vram.total_heap_size,
                       m.vram.heap_usage,
                       m.cpu_accessible_vram.total_heap_size,
                       m.cpu_accessible_vram.heap_usage,
                       m.gtt.total_heap_size,
                       m.gtt.heap_usage};
      r.size = sizeof(r.data.memory);
      return 0;
    }
    case RVGL_INFO_USAGE: {
      const UsageSnapshot u = memory_->usage();
      r.data.usage = {u.objects,
                      u.vram_bytes,
                      u.gtt_bytes,
                      u.userptr_bytes,
                      queues_.size(),
                      limits_.max_objects,
                      std::min(limits_.max_vram_bytes, facts_.capset.vram_size),
                      std::min(limits_.max_gtt_bytes, facts_.capset.gtt_size),
                      limits_.max_userptr_bytes,
                      limits_.max_queues};
      r.size = sizeof(r.data.usage);
      return 0;
    }
    case RVGL_INFO_TIMESTAMP: {
      uint64_t ts = 0;
      if (int err = dev_->query_info(AMDGPU_INFO_TIMESTAMP, &ts, sizeof(ts))) return err;
      r.data.timestamp.gpu_timestamp = ts;
      r.size = sizeof(r.data.timestamp);
      return 0;
    }
    default:
      return -EINVAL;
  }
}

}  // namespace rvgl
