// Checks shared by the rvgl-info tests: a JSON report against the capset struct, field by field
// (written out here, independently of the tool's own field table), and against the device as
// libdrm_amdgpu sees it.
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <bitset>
#include <cstdlib>
#include <cstring>

#include "device_facts.h"
#include "rocm_virgl_protocol.h"

namespace rvgl::tools_test {

inline void check_json_matches_capset(const nlohmann::json &j, const rvgl_capset &c) {
  REQUIRE(j.contains("capset"));
  const auto &s = j["capset"];
  CHECK(s["wire_format_version"] == c.wire_format_version);
  CHECK(s["protocol_major"] == c.protocol_major);
  CHECK(s["protocol_minor"] == c.protocol_minor);
  CHECK(s["features"] == c.features);
  CHECK(s["shmem_size"] == c.shmem_size);
  CHECK(s["max_submit_bytes"] == c.max_submit_bytes);
  CHECK(s["max_ibs_per_submit"] == c.max_ibs_per_submit);
  CHECK(s["max_waits_per_submit"] == c.max_waits_per_submit);
  CHECK(s["pci_vendor_id"] == c.pci_vendor_id);
  CHECK(s["pci_device_id"] == c.pci_device_id);
  CHECK(s["pci_revision_id"] == c.pci_revision_id);
  CHECK(s["family"] == c.family);
  CHECK(s["chip_external_rev"] == c.chip_external_rev);
  CHECK(s["gfx_ip_major"] == c.gfx_ip_major);
  CHECK(s["gfx_ip_minor"] == c.gfx_ip_minor);
  CHECK(s["gfx_ip_stepping"] == c.gfx_ip_stepping);
  CHECK(s["num_cu"] == c.num_cu);
  CHECK(s["num_shader_engines"] == c.num_shader_engines);
  CHECK(s["wave_size"] == c.wave_size);
  CHECK(s["gpu_counter_freq_khz"] == c.gpu_counter_freq_khz);
  CHECK(s["max_engine_clock_khz"] == c.max_engine_clock_khz);
  CHECK(s["num_xcp"] == c.num_xcp);
  CHECK(s["num_xcc"] == c.num_xcc);
  CHECK(s["kernel_queue_ip_mask"] == c.kernel_queue_ip_mask);
  CHECK(s["user_queue_ip_mask"] == c.user_queue_ip_mask);
  CHECK(s["spm_version"] == c.spm_version);
  CHECK(s["vram_size"] == c.vram_size);
  CHECK(s["visible_vram_size"] == c.visible_vram_size);
  CHECK(s["gtt_size"] == c.gtt_size);
  CHECK(s["va_start"] == c.va_start);
  CHECK(s["va_end"] == c.va_end);
  CHECK(s["va_alignment"] == c.va_alignment);
  CHECK(s["num_compute_rings"] == c.num_compute_rings);
  CHECK(s["num_sdma_rings"] == c.num_sdma_rings);
  CHECK(s["userq_eop_size"] == c.userq_eop_size);
  CHECK(s["userq_eop_alignment"] == c.userq_eop_alignment);
  CHECK(s["userq_sdma_csa_size"] == c.userq_sdma_csa_size);
  CHECK(s["userq_sdma_csa_alignment"] == c.userq_sdma_csa_alignment);
  CHECK(s["pad0"] == c.pad0);
  CHECK(s["marketing_name"] ==
        std::string(c.marketing_name, strnlen(c.marketing_name, sizeof(c.marketing_name))));
  REQUIRE(s["reserved"].size() == std::size(c.reserved));
  for (size_t i = 0; i < std::size(c.reserved); ++i)
    CHECK(s["reserved"][i] == c.reserved[i]);
  // 38 numbers, pad0, the name and the reserved words: nothing more, nothing less.
  CHECK(s.size() == 41);
  // One name per feature bit set.
  CHECK(j["decoded"]["features"].size() == std::bitset<64>(c.features).count());
}

inline void check_json_matches_device(const nlohmann::json &j, const DeviceFacts &f) {
  const auto &s = j["capset"];
  CHECK(s["pci_vendor_id"] == 0x1002);
  CHECK(s["pci_device_id"] == f.device_id);
  CHECK(s["pci_revision_id"] == f.pci_rev);
  CHECK(s["family"] == f.family);
  CHECK(s["chip_external_rev"] == f.external_rev);
  CHECK(s["gfx_ip_major"] == f.compute_ip_major);
  CHECK(s["gfx_ip_minor"] == f.compute_ip_minor);
  CHECK(s["num_cu"] == f.cu_active_number);
  CHECK(s["num_shader_engines"] == f.num_shader_engines);
  CHECK(s["wave_size"] == f.wave_front_size);
  CHECK(s["gpu_counter_freq_khz"] == f.gpu_counter_freq);
  CHECK(s["max_engine_clock_khz"] == f.max_engine_clock);
  CHECK(s["vram_size"] == f.vram);
  CHECK(s["visible_vram_size"] == f.visible_vram);
  CHECK(s["gtt_size"] == f.gtt);
  CHECK(s["va_start"] == f.virtual_address_offset);
  CHECK(s["va_end"] == f.virtual_address_max);
  CHECK(s["num_compute_rings"] == f.compute_rings);
  CHECK(s["num_sdma_rings"] == f.sdma_rings);
  CHECK(s["marketing_name"] == f.marketing_name);
  if (!std::getenv("RVGL_NUM_XCC")) CHECK(s["num_xcc"] == f.xcc_per_xcp);
}

}  // namespace rvgl::tools_test
