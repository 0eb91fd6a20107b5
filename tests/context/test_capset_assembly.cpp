// assemble_capset(): what the capset offers for what the device reported.
#include <catch2/catch.hpp>

#include "context/capset_assembly.h"

using namespace rvgl;

TEST_CASE("user queues are offered only where their wptr object can be mapped", "[capset]") {
  AmdgpuFacts d;
  d.info.base.virtual_address_offset = 2u << 20;
  d.info.base.virtual_address_max = 1ull << 47;
  d.info.base.virtual_address_alignment = 4096;
  d.info.userq_ip_mask = 1u << AMDGPU_HW_IP_COMPUTE;
  d.has_compute = true;
  d.compute.available_rings = 1;
  d.has_compute_userq = true;
  d.compute_userq.compute.eop_size = 2048;
  d.compute_userq.compute.eop_alignment = 256;
  const Config cfg;
  DeviceFacts f = assemble_capset(d, cfg, ~uint64_t{0});
  CHECK(f.capset.features & RVGL_FEATURE_USER_QUEUES);
  CHECK(f.capset.user_queue_ip_mask == 1u << RVGL_IP_COMPUTE);
  CHECK(f.userq_ip_mask == 1u << AMDGPU_HW_IP_COMPUTE);
  // A kernel with 64 KiB pages (virtual_address_alignment is its PAGE_SIZE): a 4096-byte wptr
  // object cannot be mapped, so QUEUE_CREATE(USER) could never succeed.
  d.info.base.virtual_address_alignment = 64 * 1024;
  f = assemble_capset(d, cfg, ~uint64_t{0});
  CHECK_FALSE(f.capset.features & RVGL_FEATURE_USER_QUEUES);
  CHECK(f.capset.user_queue_ip_mask == 0);
  CHECK(f.userq_ip_mask == 0);
  CHECK(f.capset.va_alignment == 64 * 1024);
  CHECK(f.capset.features & RVGL_FEATURE_KERNEL_QUEUES);  // kernel queues are unaffected
}
