/* Compiled as C11: proves the protocol header is plain C and reports the sizes a C guest sees,
 * which the C++ test compares with its own. */
#include "rocm_virgl_protocol.h"

#include "protocol_layout_c.h"

#define ENTRY(type) \
  { #type, sizeof(struct type) }

static const struct rvgl_c_layout kLayouts[] = {
    ENTRY(rvgl_capset),
    ENTRY(rvgl_shmem_header),
    ENTRY(rvgl_event),
    ENTRY(rvgl_req_hdr),
    ENTRY(rvgl_rsp_hdr),
    ENTRY(rvgl_req_nop),
    ENTRY(rvgl_rsp_nop),
    ENTRY(rvgl_req_query_info),
    ENTRY(rvgl_rsp_query_info),
    ENTRY(rvgl_req_bo_create),
    ENTRY(rvgl_rsp_bo_create),
    ENTRY(rvgl_req_bo_free),
    ENTRY(rvgl_rsp_bo_free),
    ENTRY(rvgl_req_va_map),
    ENTRY(rvgl_rsp_va_map),
    ENTRY(rvgl_req_va_unmap),
    ENTRY(rvgl_rsp_va_unmap),
    ENTRY(rvgl_req_queue_create),
    ENTRY(rvgl_rsp_queue_create),
    ENTRY(rvgl_req_queue_destroy),
    ENTRY(rvgl_rsp_queue_destroy),
    ENTRY(rvgl_ib),
    ENTRY(rvgl_wait),
    ENTRY(rvgl_req_submit),
    ENTRY(rvgl_rsp_submit),
    ENTRY(rvgl_req_queue_state),
    ENTRY(rvgl_rsp_queue_state),
    ENTRY(rvgl_req_spm_acquire),
    ENTRY(rvgl_rsp_spm_acquire),
    ENTRY(rvgl_req_spm_release),
    ENTRY(rvgl_rsp_spm_release),
    ENTRY(rvgl_req_spm_set_dest),
    ENTRY(rvgl_rsp_spm_set_dest),
    ENTRY(rvgl_spm_buffer_header),
};

const struct rvgl_c_layout *rvgl_c_layouts(unsigned *count) {
  *count = sizeof(kLayouts) / sizeof(kLayouts[0]);
  return kLayouts;
}

unsigned rvgl_c_stdc_version(void) {
  return (unsigned)__STDC_VERSION__;
}
