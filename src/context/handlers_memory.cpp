// BO_CREATE, BO_FREE, VA_MAP, VA_UNMAP: decoded here, carried out by the context's memory.
#include "context/compute_context.h"

namespace rvgl {

int32_t ComputeContext::cmd_bo_create(const Request &req, Response &rsp) {
  return memory_->bo_create(req.as<rvgl_req_bo_create>(), &rsp.as<rvgl_rsp_bo_create>());
}

int32_t ComputeContext::cmd_bo_free(const Request &req, Response &) {
  return memory_->bo_free(req.as<rvgl_req_bo_free>());
}

int32_t ComputeContext::cmd_va_map(const Request &req, Response &) {
  return memory_->va_map(req.as<rvgl_req_va_map>());
}

int32_t ComputeContext::cmd_va_unmap(const Request &req, Response &) {
  return memory_->va_unmap(req.as<rvgl_req_va_unmap>());
}

}  // namespace rvgl
