#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <string>

#include "context/command_layouts.h"
#include "protocol_layout_c.h"
#include "rocm_virgl_protocol.h"

namespace {

std::map<std::string, size_t> cpp_sizes() {
#define S(type) \
  { #type, sizeof(type) }
  return {
      S(rvgl_capset),
      S(rvgl_shmem_header),
      S(rvgl_event),
      S(rvgl_req_hdr),
      S(rvgl_rsp_hdr),
      S(rvgl_req_nop),
      S(rvgl_rsp_nop),
      S(rvgl_req_query_info),
      S(rvgl_rsp_query_info),
      S(rvgl_req_bo_create),
      S(rvgl_rsp_bo_create),
      S(rvgl_req_bo_free),
      S(rvgl_rsp_bo_free),
      S(rvgl_req_va_map),
      S(rvgl_rsp_va_map),
      S(rvgl_req_va_unmap),
      S(rvgl_rsp_va_unmap),
      S(rvgl_req_queue_create),
      S(rvgl_rsp_queue_create),
      S(rvgl_req_queue_destroy),
      S(rvgl_rsp_queue_destroy),
      S(rvgl_ib),
      S(rvgl_wait),
      S(rvgl_req_submit),
      S(rvgl_rsp_submit),
      S(rvgl_req_queue_state),
      S(rvgl_rsp_queue_state),
      S(rvgl_req_spm_acquire),
      S(rvgl_rsp_spm_acquire),
      S(rvgl_req_spm_release),
      S(rvgl_rsp_spm_release),
      S(rvgl_req_spm_set_dest),
      S(rvgl_rsp_spm_set_dest),
      S(rvgl_spm_buffer_header),
  };
#undef S
}

}  // namespace

TEST_CASE("protocol header compiles as C11 with the same layout as C++", "[proto]") {
  CHECK(rvgl_c_stdc_version() >= 201112u);
  unsigned n = 0;
  const rvgl_c_layout *c = rvgl_c_layouts(&n);
  const auto cpp = cpp_sizes();
  REQUIRE(n == cpp.size());
  for (unsigned i = 0; i < n; ++i) {
    INFO(c[i].name);
    // C sees "struct rvgl_x", C++ the same name without the keyword.
    auto it = cpp.find(c[i].name);
    REQUIRE(it != cpp.end());
    CHECK(it->second == c[i].size);
    CHECK(c[i].size % 8 == 0);
  }
}

TEST_CASE("frozen v1 sizes and offsets", "[proto]") {
  CHECK(sizeof(rvgl_capset) == 256);
  CHECK(offsetof(rvgl_capset, marketing_name) == 168);
  CHECK(sizeof(rvgl_req_hdr) == 16);
  CHECK(sizeof(rvgl_rsp_hdr) == 8);
  CHECK(offsetof(rvgl_rsp_hdr, result) == 0);
  CHECK(sizeof(rvgl_event) == 32);
  CHECK(sizeof(rvgl_req_submit) == 32);
  CHECK(offsetof(rvgl_rsp_submit, seq) == 8);
  CHECK(offsetof(rvgl_rsp_queue_state, last_completed_seq) == 24);
  CHECK(offsetof(rvgl_rsp_spm_set_dest, timeout_left_ms) == 16);
  CHECK(offsetof(rvgl_req_spm_set_dest, offset) == 32);
  CHECK(offsetof(rvgl_req_queue_create, eop_va) == 64);
}

TEST_CASE("shared page regions do not overlap and are 8-byte aligned", "[proto]") {
  CHECK(RVGL_SHMEM_HEADER_SIZE <= RVGL_EVENT_RING_OFFSET);
  CHECK(RVGL_EVENT_RING_OFFSET + RVGL_EVENT_RING_ENTRIES * sizeof(rvgl_event) <=
        RVGL_RSP_AREA_OFFSET);
  CHECK(RVGL_RSP_AREA_OFFSET + RVGL_RSP_AREA_SIZE == RVGL_SHMEM_SIZE);
  CHECK((RVGL_EVENT_RING_ENTRIES & (RVGL_EVENT_RING_ENTRIES - 1)) == 0);
  CHECK(RVGL_RSP_AREA_OFFSET % 8 == 0);
}

TEST_CASE("every v1 command has a layout with a name and a response header", "[proto]") {
  for (uint32_t cmd = 1; cmd < RVGL_CMD_COUNT; ++cmd) {
    const auto *l = rvgl::find_layout(cmd);
    REQUIRE(l != nullptr);
    CHECK(std::strlen(l->name) > 0);
    CHECK(l->req_size >= sizeof(rvgl_req_hdr));
    CHECK(l->rsp_size >= sizeof(rvgl_rsp_hdr));
    CHECK(l->rsp_size <= RVGL_MAX_RSP_SIZE);
  }
  CHECK(rvgl::find_layout(0) == nullptr);
  CHECK(rvgl::find_layout(RVGL_CMD_COUNT) == nullptr);
}
