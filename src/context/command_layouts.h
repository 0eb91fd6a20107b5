// The v1 commands' names and fixed wire sizes, in one place: the context's dispatch table, the
// trace tool and the tests all read them from here.
#pragma once

#include <array>
#include <cstdint>

#include "rocm_virgl_protocol.h"

namespace rvgl {

struct CommandLayout {
  uint32_t cmd;
  const char *name;
  uint32_t req_size;  // fixed part; SUBMIT is followed by its arrays
  uint32_t rsp_size;
};

inline constexpr std::array<CommandLayout, RVGL_CMD_COUNT - 1> kV1Commands{{
    {RVGL_CMD_NOP, "NOP", sizeof(rvgl_req_nop), sizeof(rvgl_rsp_nop)},
    {RVGL_CMD_QUERY_INFO, "QUERY_INFO", sizeof(rvgl_req_query_info), sizeof(rvgl_rsp_query_info)},
    {RVGL_CMD_BO_CREATE, "BO_CREATE", sizeof(rvgl_req_bo_create), sizeof(rvgl_rsp_bo_create)},
    {RVGL_CMD_BO_FREE, "BO_FREE", sizeof(rvgl_req_bo_free), sizeof(rvgl_rsp_bo_free)},
    {RVGL_CMD_VA_MAP, "VA_MAP", sizeof(rvgl_req_va_map), sizeof(rvgl_rsp_va_map)},
    {RVGL_CMD_VA_UNMAP, "VA_UNMAP", sizeof(rvgl_req_va_unmap), sizeof(rvgl_rsp_va_unmap)},
    {RVGL_CMD_QUEUE_CREATE, "QUEUE_CREATE", sizeof(rvgl_req_queue_create),
     sizeof(rvgl_rsp_queue_create)},
    {RVGL_CMD_QUEUE_DESTROY, "QUEUE_DESTROY", sizeof(rvgl_req_queue_destroy),
     sizeof(rvgl_rsp_queue_destroy)},
    {RVGL_CMD_SUBMIT, "SUBMIT", sizeof(rvgl_req_submit), sizeof(rvgl_rsp_submit)},
    {RVGL_CMD_QUEUE_STATE, "QUEUE_STATE", sizeof(rvgl_req_queue_state),
     sizeof(rvgl_rsp_queue_state)},
    {RVGL_CMD_SPM_ACQUIRE, "SPM_ACQUIRE", sizeof(rvgl_req_spm_acquire),
     sizeof(rvgl_rsp_spm_acquire)},
    {RVGL_CMD_SPM_RELEASE, "SPM_RELEASE", sizeof(rvgl_req_spm_release),
     sizeof(rvgl_rsp_spm_release)},
    {RVGL_CMD_SPM_SET_DEST, "SPM_SET_DEST", sizeof(rvgl_req_spm_set_dest),
     sizeof(rvgl_rsp_spm_set_dest)},
}};

constexpr const CommandLayout *find_layout(uint32_t cmd) {
  for (const auto &l : kV1Commands)
    if (l.cmd == cmd) return &l;
  return nullptr;
}

constexpr bool layouts_fit_shadow() {
  for (const auto &l : kV1Commands)
    if (l.rsp_size > RVGL_MAX_RSP_SIZE || l.req_size % 8 || l.rsp_size % 8) return false;
  return true;
}
static_assert(layouts_fit_shadow(), "every v1 response fits the decoder's shadow buffer");

}  // namespace rvgl
