// Acceptance (issue 16): where the emulator used to differ from the kernel in ways a program can
// tell, it now answers as the kernel does. Each case names the kernel function it follows.
#include <linux/capability.h>
#include <sys/syscall.h>
#include <xf86drm.h>

#include <atomic>
#include <bitset>
#include <functional>
#include <thread>

#include <catch2/catch.hpp>

#include "emu_test_support.h"

using namespace rvgl::emu_test;

namespace {

drm_amdgpu_info_hw_ip hw_ip(int fd, uint32_t ip) {
  drm_amdgpu_info_hw_ip info{};
  REQUIRE(query_info(fd, AMDGPU_INFO_HW_IP_INFO, &info, sizeof(info), ip) == 0);
  return info;
}

// A compute job of PM4 packets in its own IB slot of `ibs`.
int compute_job(int fd, uint32_t ctx, const GpuBuffer &ibs, uint64_t slot,
                const std::vector<uint32_t> &ib, uint64_t *seq) {
  return submit(fd, ctx, AMDGPU_HW_IP_COMPUTE, 0, place_ib(ibs, slot * 4096, ib),
                static_cast<uint32_t>(ib.size() * 4), seq);
}

// Drops a capability from this thread's effective set for one scope: CAP_SYS_ADMIN (the kernel
// authenticates every opener that has it, which would hide what DRM_AUTH does for everyone
// else), CAP_SYS_NICE (which permits any context priority).
class WithoutCap {
 public:
  explicit WithoutCap(int cap) {
    syscall(SYS_capget, &hdr_, saved_);
    __user_cap_data_struct d[2];
    std::memcpy(d, saved_, sizeof(d));
    d[cap / 32].effective &= ~(1u << (cap % 32));
    syscall(SYS_capset, &hdr_, d);
  }
  ~WithoutCap() { syscall(SYS_capset, &hdr_, saved_); }

 private:
  __user_cap_header_struct hdr_{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct saved_[2]{};
};

}  // namespace

// amdgpu_kms.c amdgpu_hw_ip_info: num_rings = min(amdgpu_ctx_num_entities[type], num_rings);
// amdgpu_ctx.c amdgpu_ctx_get_entity: ring >= amdgpu_ctx_num_entities[hw_ip] is -EINVAL.
TEST_CASE("rings are capped at amdgpu_ctx_num_entities: 4 compute, 2 SDMA", "[kernel][rings]") {
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  const drm_amdgpu_info_hw_ip compute = hw_ip(fd.get(), AMDGPU_HW_IP_COMPUTE);
  const drm_amdgpu_info_hw_ip sdma = hw_ip(fd.get(), AMDGPU_HW_IP_DMA);
  CHECK(compute.available_rings == 0xfu);
  CHECK(sdma.available_rings == 0x3u);

  GpuBuffer buf;
  REQUIRE(buf.create(fd.get(), 64 * 1024, 0x800000) == 0);
  uint32_t ctx = 0;
  REQUIRE(ctx_create(fd.get(), &ctx) == 0);
  std::vector<uint32_t> pm4ib;
  pm4::nop1(pm4ib);
  pm4::nop1(pm4ib);
  const uint64_t pm4_va = place_ib(buf, 0, pm4ib);
  std::vector<uint32_t> sdmaib;
  sdma::nop(sdmaib);
  const uint64_t sdma_va = place_ib(buf, 4096, sdmaib);
  uint64_t seq = 0;
  for (uint32_t ring = 0; ring < 4; ++ring) {
    REQUIRE(submit(fd.get(), ctx, AMDGPU_HW_IP_COMPUTE, ring, pm4_va, 8, &seq) == 0);
    CHECK(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_COMPUTE, ring, seq, abs_timeout_ms(5000)) == 0);
  }
  CHECK(submit(fd.get(), ctx, AMDGPU_HW_IP_COMPUTE, 4, pm4_va, 8, &seq) == -EINVAL);
  CHECK(submit(fd.get(), ctx, AMDGPU_HW_IP_COMPUTE, 7, pm4_va, 8, &seq) == -EINVAL);
  for (uint32_t ring = 0; ring < 2; ++ring) {
    REQUIRE(submit(fd.get(), ctx, AMDGPU_HW_IP_DMA, ring, sdma_va, 4, &seq) == 0);
    CHECK(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_DMA, ring, seq, abs_timeout_ms(5000)) == 0);
  }
  CHECK(submit(fd.get(), ctx, AMDGPU_HW_IP_DMA, 2, sdma_va, 4, &seq) == -EINVAL);
  CHECK(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_COMPUTE, 4, 1, 0) == -EINVAL);
}

// amdgpu_ctx.c amdgpu_ctx_query: UNKNOWN_RESET once per change of adev->gpu_reset_counter since
// the context's last query, NO_RESET otherwise; it never answers GUILTY or INNOCENT.
TEST_CASE("CTX QUERY_STATE (v1) reports a reset once, as UNKNOWN_RESET", "[kernel][ctx]") {
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  GpuBuffer buf;
  REQUIRE(buf.create(fd.get(), 64 * 1024, 0x800000) == 0);
  uint32_t victim = 0, bystander = 0;
  REQUIRE(ctx_create(fd.get(), &victim) == 0);
  REQUIRE(ctx_create(fd.get(), &bystander) == 0);
  CHECK(ctx_state1(fd.get(), victim) == AMDGPU_CTX_NO_RESET);

  SECTION("an injected hang: the guilty context too hears UNKNOWN_RESET, then NO_RESET") {
    Knob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "50", "2000");
    Knob hang("RVGL_EMU_HANG_JOB", "1", "0");
    std::vector<uint32_t> ib;
    sdma::nop(ib);
    uint64_t seq = 0;
    REQUIRE(submit(fd.get(), victim, AMDGPU_HW_IP_DMA, 0, place_ib(buf, 0, ib), 4, &seq) == 0);
    CHECK(wait_cs(fd.get(), victim, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == -ETIME);
    CHECK((ctx_state2(fd.get(), victim) & AMDGPU_CTX_QUERY2_FLAGS_GUILTY) != 0);
    CHECK(ctx_state1(fd.get(), victim) == AMDGPU_CTX_UNKNOWN_RESET);
    CHECK(ctx_state1(fd.get(), victim) == AMDGPU_CTX_NO_RESET);
    CHECK(ctx_state1(fd.get(), victim) == AMDGPU_CTX_NO_RESET);
    CHECK(ctx_state1(fd.get(), bystander) == AMDGPU_CTX_UNKNOWN_RESET);
    CHECK(ctx_state1(fd.get(), bystander) == AMDGPU_CTX_NO_RESET);
  }
  SECTION("an innocent reset: once per reset, for every context") {
    Knob reset("RVGL_EMU_RESET_JOB", "1", "0");
    std::vector<uint32_t> ib;
    sdma::nop(ib);
    uint64_t seq = 0;
    for (int round = 0; round < 2; ++round) {
      uint32_t c = 0;
      REQUIRE(ctx_create(fd.get(), &c) == 0);  // its first job is the one the reset takes
      REQUIRE(submit(fd.get(), c, AMDGPU_HW_IP_DMA, 0, place_ib(buf, 0, ib), 4, &seq) == 0);
      CHECK(wait_cs(fd.get(), c, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == -ECANCELED);
      CHECK(ctx_state1(fd.get(), bystander) == AMDGPU_CTX_UNKNOWN_RESET);
      CHECK(ctx_state1(fd.get(), bystander) == AMDGPU_CTX_NO_RESET);
      REQUIRE(ctx_free(fd.get(), c) == 0);
    }
    // A context created after the resets has seen none of them.
    uint32_t late = 0;
    REQUIRE(ctx_create(fd.get(), &late) == 0);
    CHECK(ctx_state1(fd.get(), late) == AMDGPU_CTX_NO_RESET);
  }
}

// amdgpu_kms.c AMDGPU_INFO_VIDEO_CAPS: DECODE and ENCODE fill drm_amdgpu_info_video_caps (here:
// no codec valid), any other type is -EINVAL.
TEST_CASE("INFO VIDEO_CAPS answers both directions with no codecs", "[kernel][info]") {
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  for (uint32_t type : {AMDGPU_INFO_VIDEO_CAPS_DECODE, AMDGPU_INFO_VIDEO_CAPS_ENCODE}) {
    drm_amdgpu_info_video_caps caps;
    std::memset(&caps, 0xa5, sizeof(caps));
    drm_amdgpu_info a{};
    a.return_pointer = reinterpret_cast<uintptr_t>(&caps);
    a.return_size = sizeof(caps);
    a.query = AMDGPU_INFO_VIDEO_CAPS;
    a.video_cap.type = type;
    REQUIRE(xioctl(fd.get(), DRM_IOCTL_AMDGPU_INFO, &a) == 0);
    const drm_amdgpu_info_video_caps zero{};
    CHECK(std::memcmp(&caps, &zero, sizeof(caps)) == 0);
  }
  uint32_t v = 0;
  drm_amdgpu_info a{};
  a.return_pointer = reinterpret_cast<uintptr_t>(&v);
  a.return_size = sizeof(v);
  a.query = AMDGPU_INFO_VIDEO_CAPS;
  a.video_cap.type = 2;
  CHECK(xioctl(fd.get(), DRM_IOCTL_AMDGPU_INFO, &a) == -EINVAL);
}

// gfx_v11_0.c gfx_v11_0_get_cu_info: SE i, SA j at bitmap[i % 4][j + (i / 4) * 2], the first
// two active CUs of each array always on; gfx_v9_4_3.c gfx_v9_4_3_get_cu_info: bitmap[xcc][se][sa]
// with every active CU always on, DEV_INFO carrying XCC 0 (amdgpu_kms.c copies bitmap[0]).
// ao_cu_mask packs SE 0-1 / SA 0-1 at se * 16 + sa * 8 in both.
TEST_CASE("DEV_INFO CU bitmaps cover every active CU of XCC 0", "[kernel][info]") {
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  rvgl_drm_amdgpu_info_device di{};
  REQUIRE(query_info(fd.get(), AMDGPU_INFO_DEV_INFO, &di, sizeof(di)) == 0);
  const drm_amdgpu_info_device &b = di.base;
  uint32_t bits = 0, ao_bits = 0;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) {
      bits += std::bitset<32>(b.cu_bitmap[r][c]).count();
      ao_bits += std::bitset<32>(b.cu_ao_bitmap[r][c]).count();
      CHECK((b.cu_ao_bitmap[r][c] & ~b.cu_bitmap[r][c]) == 0);
      CHECK(b.cu_bitmap[r][c] < (1u << b.num_cu_per_sh));
    }
  uint32_t packed = 0;
  for (uint32_t se = 0; se < 2; ++se)
    for (uint32_t sa = 0; sa < 2; ++sa)
      packed |= b.cu_ao_bitmap[se][sa] << (se * 16 + sa * 8);
  CHECK(b.cu_ao_mask == packed);
  const uint32_t arrays = b.num_shader_engines * b.num_shader_arrays_per_engine;
  if (b.family >= RVGL_AMDGPU_FAMILY_GC_11_0_0) {
    // One XCC: the bitmap holds every CU the count reports, SE 4 and up in columns 2-3.
    CHECK(bits == b.cu_active_number);
    CHECK(ao_bits == 2 * arrays);
    for (uint32_t se = 0; se < 8; ++se)
      for (uint32_t sa = 0; sa < 2; ++sa) {
        const uint32_t cell = b.cu_bitmap[se % 4][sa + (se / 4) * 2];
        if (se < b.num_shader_engines && sa < b.num_shader_arrays_per_engine)
          CHECK(cell != 0);
        else
          CHECK(cell == 0);
      }
  } else {
    // XCC 0 of a partitioned part: its share of the count; every active CU always on.
    REQUIRE(bits != 0);
    CHECK(b.cu_active_number % bits == 0);
    CHECK(ao_bits == bits);
  }
}

// drm_gem.c drm_gem_flink_ioctl / drm_gem_open_ioctl (DRM_AUTH, not DRM_RENDER_ALLOW): names are
// per device from 1, an object keeps its name, a name dies with the object's handles.
// drm_auth.c: the first opener is master and authenticated, others after the master's
// AUTH_MAGIC; drm_file_alloc authenticates CAP_SYS_ADMIN openers.
TEST_CASE("GEM_FLINK and GEM_OPEN share objects by global name on the primary node",
          "[kernel][gem]") {
  Fd master(open("/dev/dri/card0", O_RDWR | O_CLOEXEC));
  REQUIRE(master.get() >= 0);
  uint32_t h = 0;
  REQUIRE(gem_create(master.get(), 8192, AMDGPU_GEM_DOMAIN_GTT, 0, &h) == 0);
  auto *mp = static_cast<uint32_t *>(gem_cpu_map(master.get(), h, 8192));
  REQUIRE(mp != nullptr);
  mp[5] = 0x5eed;
  drm_gem_flink fl{};
  fl.handle = h;
  REQUIRE(xioctl(master.get(), DRM_IOCTL_GEM_FLINK, &fl) == 0);
  CHECK(fl.name >= 1);
  drm_gem_flink again{};
  again.handle = h;
  REQUIRE(xioctl(master.get(), DRM_IOCTL_GEM_FLINK, &again) == 0);
  CHECK(again.name == fl.name);
  drm_gem_flink bad{};
  bad.handle = h + 1000;
  CHECK(xioctl(master.get(), DRM_IOCTL_GEM_FLINK, &bad) == -ENOENT);

  Fd render = open_render();
  REQUIRE(render.get() >= 0);
  drm_gem_open op{};
  op.name = fl.name;
  CHECK(xioctl(render.get(), DRM_IOCTL_GEM_OPEN, &op) == -EACCES);  // no DRM_RENDER_ALLOW

  Fd other(open("/dev/dri/card0", O_RDWR | O_CLOEXEC));
  REQUIRE(other.get() >= 0);
  {
    WithoutCap drop(CAP_SYS_ADMIN);
    CHECK(xioctl(other.get(), DRM_IOCTL_GEM_OPEN, &op) == -EACCES);  // not authenticated
    drm_auth magic{};
    REQUIRE(xioctl(other.get(), DRM_IOCTL_GET_MAGIC, &magic) == 0);
    CHECK(xioctl(other.get(), DRM_IOCTL_AUTH_MAGIC, &magic) == -EACCES);  // not the master
    drm_auth zero{};
    CHECK(xioctl(master.get(), DRM_IOCTL_AUTH_MAGIC, &zero) == -EINVAL);  // drmIsMaster's probe
    REQUIRE(xioctl(master.get(), DRM_IOCTL_AUTH_MAGIC, &magic) == 0);
    REQUIRE(xioctl(other.get(), DRM_IOCTL_GEM_OPEN, &op) == 0);
  }
  CHECK(op.size == 8192);
  auto *op_map = static_cast<uint32_t *>(gem_cpu_map(other.get(), op.handle, 8192));
  REQUIRE(op_map != nullptr);
  CHECK(op_map[5] == 0x5eed);  // the same pages
  drm_gem_open unknown{};
  unknown.name = fl.name + 1000;
  CHECK(xioctl(other.get(), DRM_IOCTL_GEM_OPEN, &unknown) == -ENOENT);

  munmap(op_map, 8192);
  munmap(mp, 8192);
  REQUIRE(gem_close(other.get(), op.handle) == 0);
  REQUIRE(gem_close(master.get(), h) == 0);
  drm_gem_open gone{};
  gone.name = fl.name;
  CHECK(xioctl(master.get(), DRM_IOCTL_GEM_OPEN, &gone) == -ENOENT);
}

// amdgpu_kms.c AMDGPU_INFO_VRAM_GTT / AMDGPU_INFO_MEMORY: usable = real size - pinned -
// AMDGPU_VM_RESERVED_VRAM (8 MiB); usage counts the kernel's pinned objects; GTT subtracts
// gart_pin_size.
TEST_CASE("a context above NORMAL priority needs CAP_SYS_NICE or the DRM master", "[kernel][ctx]") {
  // amdgpu_ctx_priority_permit(): capable(CAP_SYS_NICE) || drm_is_current_master(filp); any
  // other file, a second primary one included, gets EACCES.
  Fd master(open("/dev/dri/card0", O_RDWR | O_CLOEXEC));
  REQUIRE(master.get() >= 0);
  Fd other(open("/dev/dri/card0", O_RDWR | O_CLOEXEC));
  REQUIRE(other.get() >= 0);
  Fd render = open_render();
  REQUIRE(render.get() >= 0);
  WithoutCap drop(CAP_SYS_NICE);
  const auto alloc_high = [](int fd) {
    drm_amdgpu_ctx a{};
    a.in.op = AMDGPU_CTX_OP_ALLOC_CTX;
    a.in.priority = AMDGPU_CTX_PRIORITY_HIGH;
    return xioctl(fd, DRM_IOCTL_AMDGPU_CTX, &a);
  };
  CHECK(alloc_high(master.get()) == 0);
  CHECK(alloc_high(other.get()) == -EACCES);
  CHECK(alloc_high(render.get()) == -EACCES);
}

TEST_CASE("VRAM and GTT accounting subtracts what the kernel keeps", "[kernel][info]") {
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  drm_amdgpu_memory_info m{};
  REQUIRE(query_info(fd.get(), AMDGPU_INFO_MEMORY, &m, sizeof(m)) == 0);
  drm_amdgpu_info_vram_gtt vg{};
  REQUIRE(query_info(fd.get(), AMDGPU_INFO_VRAM_GTT, &vg, sizeof(vg)) == 0);
  const uint64_t reserved = 8ull << 20;
  CHECK(vg.vram_size == m.vram.usable_heap_size);
  CHECK(vg.gtt_size == m.gtt.usable_heap_size);
  CHECK(vg.vram_cpu_accessible_size == m.cpu_accessible_vram.usable_heap_size);
  REQUIRE(m.vram.usable_heap_size + reserved < m.vram.total_heap_size);  // something is pinned
  const uint64_t pinned = m.vram.total_heap_size - m.vram.usable_heap_size - reserved;
  CHECK(m.vram.heap_usage >= pinned);  // the pins are in the usage
  CHECK(m.vram.max_allocation == m.vram.usable_heap_size * 3 / 4);
  CHECK(m.gtt.usable_heap_size < m.gtt.total_heap_size);
  CHECK(m.gtt.heap_usage >= m.gtt.total_heap_size - m.gtt.usable_heap_size);
  CHECK(m.cpu_accessible_vram.usable_heap_size <= m.vram.usable_heap_size);
  uint64_t usage = 0;
  REQUIRE(query_info(fd.get(), AMDGPU_INFO_VRAM_USAGE, &usage, 8) == 0);
  CHECK(usage == m.vram.heap_usage);

  // What is not pinned can be allocated (pages are touched only on use), and not a page more:
  // a VRAM-only object past it lands in GTT.
  const uint64_t room = (m.vram.total_heap_size - m.vram.heap_usage) & ~uint64_t{4095};
  uint32_t big = 0, more = 0;
  REQUIRE(gem_create(fd.get(), room, AMDGPU_GEM_DOMAIN_VRAM, 0, &big) == 0);
  uint64_t after = 0, gtt_before = 0, gtt_after = 0;
  REQUIRE(query_info(fd.get(), AMDGPU_INFO_VRAM_USAGE, &after, 8) == 0);
  CHECK(after == usage + room);
  REQUIRE(query_info(fd.get(), AMDGPU_INFO_GTT_USAGE, &gtt_before, 8) == 0);
  REQUIRE(gem_create(fd.get(), 4096, AMDGPU_GEM_DOMAIN_VRAM, 0, &more) == 0);
  REQUIRE(query_info(fd.get(), AMDGPU_INFO_GTT_USAGE, &gtt_after, 8) == 0);
  CHECK(gtt_after == gtt_before + 4096);
  REQUIRE(gem_close(fd.get(), more) == 0);
  REQUIRE(gem_close(fd.get(), big) == 0);
}

// Register-state packets are register writes; a packet that needs shaders fails the job as a
// hang the kernel recovered from would (amdgpu_job.c amdgpu_job_timedout: the fence carries
// -ETIME, the context is guilty; amdgpu_cs.c: a guilty context's CS is -ECANCELED).
TEST_CASE("PM4 register state is absorbed; a dispatch fails the job like a hang",
          "[kernel][packets]") {
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  GpuBuffer ibs, data;
  REQUIRE(ibs.create(fd.get(), 64 * 1024, 0x800000) == 0);
  REQUIRE(data.create(fd.get(), 4096, 0xa00000) == 0);
  uint32_t ctx = 0;
  REQUIRE(ctx_create(fd.get(), &ctx) == 0);

  // What RADV's preamble looks like: CONTEXT_CONTROL, CLEAR_STATE, SET_*_REG runs.
  std::vector<uint32_t> ib{
      pm4::packet3(0x28, 2), 0x80000000u, 0x80000000u,     // CONTEXT_CONTROL
      pm4::packet3(0x12, 1), 0,                            // CLEAR_STATE
      pm4::packet3(0x69, 3), 0x0a0,       1,           2,  // SET_CONTEXT_REG x2
      pm4::packet3(0x76, 2), 0x204,       0x1234,          // SET_SH_REG
      pm4::packet3(0x79, 2), 0x1d0,       7,               // SET_UCONFIG_REG
      pm4::packet3(0x68, 2), 0x010,       9,               // SET_CONFIG_REG
      pm4::packet3(0x9b, 2), 0x204,       0x1234,          // SET_SH_REG_INDEX
  };
  pm4::write_data(ib, data.va, {0xc0ffee});
  // COPY_DATA immediate -> memory (SRC_SEL 5, DST_SEL 5).
  ib.insert(ib.end(), {pm4::packet3(0x40, 5), 5u | (5u << 8), 0x77, 0, uint32_t(data.va + 8),
                       uint32_t((data.va + 8) >> 32)});
  uint64_t seq = 0;
  REQUIRE(compute_job(fd.get(), ctx, ibs, 0, ib, &seq) == 0);
  CHECK(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_COMPUTE, 0, seq, abs_timeout_ms(5000)) == 0);
  CHECK(data.u32()[0] == 0xc0ffee);
  CHECK(data.u32()[2] == 0x77);
  CHECK(ctx_state2(fd.get(), ctx) == 0);

  // DISPATCH_DIRECT (0x15) after state: the job fails and writes nothing after the dispatch.
  std::vector<uint32_t> disp{pm4::packet3(0x76, 2), 0x204, 0x1234,         // SET_SH_REG
                             pm4::packet3(0x15, 4), 1,     1,      1, 0};  // DISPATCH_DIRECT 1x1x1
  pm4::write_data(disp, data.va + 4, {0xbad});
  REQUIRE(compute_job(fd.get(), ctx, ibs, 1, disp, &seq) == 0);
  CHECK(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_COMPUTE, 0, seq, abs_timeout_ms(5000)) == -ETIME);
  CHECK(data.u32()[1] == 0);
  CHECK((ctx_state2(fd.get(), ctx) & AMDGPU_CTX_QUERY2_FLAGS_GUILTY) != 0);
  CHECK(compute_job(fd.get(), ctx, ibs, 0, ib, &seq) == -ECANCELED);

  // A draw on another context ends the same way; the first context's state is unchanged.
  uint32_t ctx2 = 0;
  REQUIRE(ctx_create(fd.get(), &ctx2) == 0);
  std::vector<uint32_t> draw{pm4::packet3(0x2d, 2), 3, 2};  // DRAW_INDEX_AUTO
  REQUIRE(compute_job(fd.get(), ctx2, ibs, 2, draw, &seq) == 0);
  CHECK(wait_cs(fd.get(), ctx2, AMDGPU_HW_IP_COMPUTE, 0, seq, abs_timeout_ms(5000)) == -ETIME);
  CHECK(compute_job(fd.get(), ctx2, ibs, 0, ib, &seq) == -ECANCELED);
}

// amdgpu_xcp.c / amdgpu_gfx.c: a partitionable part reports its mode and each partition's XCCs
// in sysfs; DEV_INFO's count covers the node's XCCs while its bitmap holds XCC 0.
TEST_CASE("compute partitions are described as amdgpu's sysfs does", "[kernel][partition]") {
  auto read_text = [](const std::string &path) {
    std::string out;
    if (FILE *f = fopen(path.c_str(), "re")) {
      char buf[64] = {};
      if (fgets(buf, sizeof(buf), f)) out = buf;
      fclose(f);
    }
    return out;
  };
  auto xcc_bits = [](int fd, uint32_t &count) {
    rvgl_drm_amdgpu_info_device di{};
    REQUIRE(query_info(fd, AMDGPU_INFO_DEV_INFO, &di, sizeof(di)) == 0);
    uint32_t bits = 0;
    for (auto &row : di.base.cu_bitmap)
      for (uint32_t cell : row)
        bits += std::bitset<32>(cell).count();
    count = di.base.cu_active_number;
    return bits;
  };
  const std::string dev = "/sys/class/drm/renderD128/device/";
  const std::string num_inst = read_text(dev + "compute_partition_config/xcc/num_inst");
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  uint32_t count = 0;
  const uint32_t bits = xcc_bits(fd.get(), count);
  if (num_inst.empty()) {
    // No partitions: one XCC, and no partition attributes at all.
    CHECK(count == bits);
    CHECK(read_text(dev + "current_compute_partition").empty());
    return;
  }
  const uint32_t xccs = static_cast<uint32_t>(std::stoul(num_inst));
  CHECK(count == bits * xccs);
  CHECK(read_text(dev + "compute_partition_config/xcp_config") ==
        read_text(dev + "current_compute_partition"));
  CHECK(read_text(dev + "available_compute_partition") == "SPX, DPX, QPX, CPX\n");
  fd.reset();
  // Fewer XCCs per node: a partitioned mode, which the node then describes.
  for (const auto &[per_node, mode] :
       {std::pair{xccs / 2, "DPX\n"}, std::pair{xccs / 4, "QPX\n"}, std::pair{1u, "CPX\n"}}) {
    Knob k("RVGL_EMU_XCCS", std::to_string(per_node), "0");
    REQUIRE(k.rc() == 0);
    CHECK(read_text(dev + "current_compute_partition") == mode);
    CHECK(read_text(dev + "compute_partition_config/xcc/num_inst") ==
          std::to_string(per_node) + "\n");
    Fd part = open_render();
    REQUIRE(part.get() >= 0);
    uint32_t part_count = 0;
    CHECK(xcc_bits(part.get(), part_count) == bits);
    CHECK(part_count == bits * per_node);
  }
}

// idr_alloc(idr, ptr, 1, 0, ...): every per-file namespace hands out the lowest free id from 1
// (drm_gem_handle_create_tail(), drm_syncobj_get_handle(), amdgpu_ctx_alloc()), and a freed id is
// handed out again, below or at the top.
TEST_CASE("GEM, syncobj and context handles are the lowest free id from 1", "[kernel][handles]") {
  Fd fd = open_render();
  auto gem = [&] {
    uint32_t h = 0;
    REQUIRE(gem_create(fd.get(), 4096, AMDGPU_GEM_DOMAIN_GTT, 0, &h) == 0);
    return h;
  };
  auto syncobj = [&] {
    uint32_t h = 0;
    REQUIRE(drmSyncobjCreate(fd.get(), 0, &h) == 0);
    return h;
  };
  auto ctx = [&] {
    uint32_t h = 0;
    REQUIRE(ctx_create(fd.get(), &h) == 0);
    return h;
  };

  CHECK(gem() == 1);
  CHECK(gem() == 2);
  CHECK(gem() == 3);
  CHECK(gem() == 4);
  REQUIRE(gem_close(fd.get(), 2) == 0);
  CHECK(gem() == 2);  // a hole below the top
  REQUIRE(gem_close(fd.get(), 3) == 0);
  REQUIRE(gem_close(fd.get(), 4) == 0);  // the top, with a hole below it
  CHECK(gem() == 3);
  CHECK(gem() == 4);
  CHECK(gem() == 5);
  CHECK(gem_close(fd.get(), 6) != 0);  // never handed out
  CHECK(gem_close(fd.get(), 0) != 0);

  CHECK(syncobj() == 1);
  CHECK(syncobj() == 2);
  CHECK(syncobj() == 3);
  REQUIRE(drmSyncobjDestroy(fd.get(), 1) == 0);
  REQUIRE(drmSyncobjDestroy(fd.get(), 3) == 0);
  CHECK(drmSyncobjDestroy(fd.get(), 3) != 0);  // gone
  CHECK(syncobj() == 1);
  CHECK(syncobj() == 3);

  CHECK(ctx() == 1);
  CHECK(ctx() == 2);
  REQUIRE(ctx_free(fd.get(), 1) == 0);
  CHECK(ctx() == 1);
  CHECK(ctx() == 3);
}

// amdgpu_ring.c amdgpu_ring_max_ibs (GFX 192, COMPUTE 125, others 49), reported by
// AMDGPU_INFO_MAX_IBS and enforced by amdgpu_cs_p1_ib ("num_ibs >= max" before one more: -EINVAL);
// sdma_v6_0_ring_emit_ib writes the IB address & 0xffffffe0, so the engine runs from there.
TEST_CASE("IBs per CS are capped per IP; an SDMA IB runs from its address rounded to 32 bytes",
          "[kernel][cs]") {
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  uint32_t max_ibs[AMDGPU_HW_IP_DMA + 1] = {};
  REQUIRE(query_info(fd.get(), RVGL_AMDGPU_INFO_MAX_IBS, max_ibs, sizeof(max_ibs)) == 0);
  CHECK(max_ibs[AMDGPU_HW_IP_GFX] == 192);
  CHECK(max_ibs[AMDGPU_HW_IP_COMPUTE] == 125);
  CHECK(max_ibs[AMDGPU_HW_IP_DMA] == 49);

  GpuBuffer buf;
  REQUIRE(buf.create(fd.get(), 64 * 1024, 0x800000) == 0);
  uint32_t ctx = 0;
  REQUIRE(ctx_create(fd.get(), &ctx) == 0);
  // Bytes 0..31: a write of 0xa; 32..63: a write of 0xb (each padded with NOPs to 8 dwords).
  const uint64_t out = buf.va + 8192;
  std::vector<uint32_t> two;
  for (uint32_t v : {0xau, 0xbu}) {
    sdma::write(two, out, {v});
    while (two.size() % 8)
      sdma::nop(two);
  }
  const uint64_t ib_va = place_ib(buf, 0, two);
  auto sdma_cs = [&](uint32_t n, uint64_t va, uint32_t bytes, uint64_t *seq) {
    std::vector<drm_amdgpu_cs_chunk_ib> more(n - 1);
    std::vector<drm_amdgpu_cs_chunk> extra;
    for (auto &ib : more) {
      ib.va_start = va;
      ib.ib_bytes = bytes;
      ib.ip_type = AMDGPU_HW_IP_DMA;
      extra.push_back({AMDGPU_CHUNK_ID_IB, sizeof(ib) / 4, reinterpret_cast<uintptr_t>(&ib)});
    }
    return submit(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, va, bytes, seq, extra);
  };
  uint64_t seq = 0;
  CHECK(sdma_cs(50, ib_va + 32, 32, &seq) == -EINVAL);
  REQUIRE(sdma_cs(49, ib_va + 32, 32, &seq) == 0);
  CHECK(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == 0);
  CHECK(*reinterpret_cast<uint32_t *>(buf.u8() + 8192) == 0xbu);
  // 16 bytes into the first write: the engine starts at its header.
  REQUIRE(sdma_cs(1, ib_va + 16, 32, &seq) == 0);
  CHECK(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == 0);
  CHECK(*reinterpret_cast<uint32_t *>(buf.u8() + 8192) == 0xau);
}

// amdgpu_cs_sync_rings -> amdgpu_sync_resv: every listed object's fences of another VM are waited
// for (AMDGPU_SYNC_NE_OWNER), the file's own are not, and an object created with EXPLICIT_SYNC
// makes the CS wait for none (AMDGPU_SYNC_EXPLICIT).
TEST_CASE(
    "implicit sync: a CS waits for other files' work on a listed object, unless the object "
    "is EXPLICIT_SYNC",
    "[kernel][cs]") {
  const bool explicit_sync = GENERATE(false, true);
  INFO("EXPLICIT_SYNC " << explicit_sync);
  Fd fa = open_render(), fb = open_render();
  REQUIRE(fa.get() >= 0);
  REQUIRE(fb.get() >= 0);
  // The shared object: created in a, imported into b (the same GEM object), mapped in both.
  uint32_t sa = 0, sb = 0;
  REQUIRE(gem_create(fa.get(), 4096, AMDGPU_GEM_DOMAIN_GTT,
                     explicit_sync ? AMDGPU_GEM_CREATE_EXPLICIT_SYNC : 0, &sa) == 0);
  drm_prime_handle exp{};
  exp.handle = sa;
  exp.flags = DRM_CLOEXEC | DRM_RDWR;
  REQUIRE(xioctl(fa.get(), DRM_IOCTL_PRIME_HANDLE_TO_FD, &exp) == 0);
  drm_prime_handle imp{};
  imp.fd = exp.fd;
  REQUIRE(xioctl(fb.get(), DRM_IOCTL_PRIME_FD_TO_HANDLE, &imp) == 0);
  close(exp.fd);
  sb = imp.handle;
  const uint64_t shared_va = 0x4000000;
  REQUIRE(gem_va(fa.get(), AMDGPU_VA_OP_MAP, sa, shared_va, 0, 4096) == 0);
  REQUIRE(gem_va(fb.get(), AMDGPU_VA_OP_MAP, sb, shared_va, 0, 4096) == 0);
  auto list_of = [](int fd, uint32_t handle) {
    drm_amdgpu_bo_list_entry e{handle, 0};
    drm_amdgpu_bo_list l{};
    l.in.operation = AMDGPU_BO_LIST_OP_CREATE;
    l.in.bo_number = 1;
    l.in.bo_info_size = sizeof(e);
    l.in.bo_info_ptr = reinterpret_cast<uintptr_t>(&e);
    REQUIRE(xioctl(fd, DRM_IOCTL_AMDGPU_BO_LIST, &l) == 0);
    return l.out.list_handle;
  };
  const uint32_t la = list_of(fa.get(), sa), lb = list_of(fb.get(), sb);

  GpuBuffer abuf, bbuf;
  REQUIRE(abuf.create(fa.get(), 64 * 1024, 0x800000) == 0);
  REQUIRE(bbuf.create(fb.get(), 64 * 1024, 0x800000) == 0);
  uint32_t ca = 0, cb = 0;
  REQUIRE(ctx_create(fa.get(), &ca) == 0);
  REQUIRE(ctx_create(fb.get(), &cb) == 0);
  // a's SDMA job lists the object and waits on a private gate word the test opens.
  const uint64_t gate = abuf.va + 32768;
  std::vector<uint32_t> held;
  sdma::poll_mem_equal(held, gate, 1);
  uint64_t a_seq = 0, a2_seq = 0, b_seq = 0;
  REQUIRE(submit(fa.get(), ca, AMDGPU_HW_IP_DMA, 0, place_ib(abuf, 0, held), held.size() * 4,
                 &a_seq, {}, la) == 0);
  // a's own compute job on the object does not wait for a's held job: same VM.
  std::vector<uint32_t> own;
  pm4::write_data(own, shared_va + 8, {0xa2});
  REQUIRE(submit(fa.get(), ca, AMDGPU_HW_IP_COMPUTE, 0, place_ib(abuf, 4096, own), own.size() * 4,
                 &a2_seq, {}, la) == 0);
  CHECK(wait_cs(fa.get(), ca, AMDGPU_HW_IP_COMPUTE, 0, a2_seq, abs_timeout_ms(5000)) == 0);
  // b's job on the object waits for a's held job, unless the object is explicitly synced.
  std::vector<uint32_t> mark;
  pm4::write_data(mark, shared_va, {0xb1});
  REQUIRE(submit(fb.get(), cb, AMDGPU_HW_IP_COMPUTE, 0, place_ib(bbuf, 0, mark), mark.size() * 4,
                 &b_seq, {}, lb) == 0);
  if (explicit_sync) {
    CHECK(wait_cs(fb.get(), cb, AMDGPU_HW_IP_COMPUTE, 0, b_seq, abs_timeout_ms(5000)) == 0);
  } else {
    CHECK(wait_cs(fb.get(), cb, AMDGPU_HW_IP_COMPUTE, 0, b_seq, abs_timeout_ms(200)) == 1);
  }
  CHECK(wait_cs(fa.get(), ca, AMDGPU_HW_IP_DMA, 0, a_seq, 0) == 1);  // still held
  __atomic_store_n(reinterpret_cast<uint32_t *>(abuf.u8() + 32768), 1u, __ATOMIC_RELEASE);
  CHECK(wait_cs(fa.get(), ca, AMDGPU_HW_IP_DMA, 0, a_seq, abs_timeout_ms(5000)) == 0);
  CHECK(wait_cs(fb.get(), cb, AMDGPU_HW_IP_COMPUTE, 0, b_seq, abs_timeout_ms(5000)) == 0);
}

namespace {

// An SDMA ring with one held job: job 1 polls a gate word the test opens, then writes its marker;
// the jobs queued behind it each write a marker too, so what has run shows in memory.
struct HeldSdmaRing {
  static constexpr uint64_t kGate = 60 * 1024;     // the gate word, in buf
  static constexpr uint64_t kMarkers = 56 * 1024;  // job k's marker at kMarkers + 4 * k
  int fd;
  uint32_t ctx;
  GpuBuffer &buf;

  uint64_t hold() const {
    std::vector<uint32_t> ib;
    sdma::poll_mem_equal(ib, buf.va + kGate, 1);
    sdma::write(ib, buf.va + kMarkers + 4, {1});
    uint64_t seq = 0;
    REQUIRE(submit(fd, ctx, AMDGPU_HW_IP_DMA, 0, place_ib(buf, 0, ib), ib.size() * 4, &seq) == 0);
    return seq;
  }
  // Job k (k < 48) writes k to its marker; its IB has its own 256-byte slot.
  int mark(uint32_t k, uint64_t *seq) const {
    std::vector<uint32_t> ib;
    sdma::write(ib, buf.va + kMarkers + 4 * k, {k});
    const uint64_t va = place_ib(buf, 4096 + 256 * k, ib);
    return submit(fd, ctx, AMDGPU_HW_IP_DMA, 0, va, static_cast<uint32_t>(ib.size() * 4), seq);
  }
  uint32_t marker(uint32_t k) const {
    return __atomic_load_n(buf.u32() + (kMarkers + 4 * k) / 4, __ATOMIC_ACQUIRE);
  }
  void open_gate() const { __atomic_store_n(buf.u32() + kGate / 4, 1u, __ATOMIC_RELEASE); }
};

// Joins the test's threads on the way out, whatever failed: `release` first lets them finish.
class Joiner {
 public:
  explicit Joiner(std::function<void()> release) : release_(std::move(release)) {}
  ~Joiner() { join(); }
  void add(std::thread t) { threads_.push_back(std::move(t)); }
  void join() {
    release_();
    for (auto &t : threads_)
      if (t.joinable()) t.join();
  }

 private:
  std::function<void()> release_;
  std::vector<std::thread> threads_;
};

// Whether thread `tid` of this process sleeps in a futex wait (how the emulator's waits sleep).
bool sleeps_in_futex(pid_t tid) {
  const std::string path = "/proc/self/task/" + std::to_string(tid) + "/syscall";
  FILE *f = fopen(path.c_str(), "re");
  if (!f) return false;
  long nr = -1;
  const bool ok = fscanf(f, "%ld", &nr) == 1;
  fclose(f);
  return ok && nr == SYS_futex;
}

uint64_t file_contexts(int fd) {
  rvgl_emu_file_counters c{};
  return rvgl_emu_get_file_counters(fd, &c, sizeof(c)) == 0 ? c.contexts : ~0ull;
}

}  // namespace

// amdgpu_cs.c amdgpu_cs_sync_rings() -> amdgpu_ctx.c amdgpu_ctx_wait_prev_fence(): the CS of an
// entity's job takes the slot fences[sequence & (amdgpu_sched_jobs - 1)] and first waits,
// interruptibly and without a timeout, for the fence still in it: the job 32 sequence numbers
// back. Other entities (another ring, another context) and other files are not held up.
TEST_CASE("the CS of an entity's 33rd unfinished job waits for the job 32 back",
          "[kernel][cs][block]") {
  Knob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "30000", "2000");
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  GpuBuffer buf;
  REQUIRE(buf.create(fd.get(), 64 * 1024, 0x800000) == 0);
  uint32_t ctx = 0;
  REQUIRE(ctx_create(fd.get(), &ctx) == 0);
  const HeldSdmaRing ring{fd.get(), ctx, buf};
  Joiner joiner([&] { ring.open_gate(); });
  const uint64_t held = ring.hold();
  REQUIRE(held == 1);
  for (uint32_t k = 2; k <= 32; ++k) {
    uint64_t seq = 0;
    REQUIRE(ring.mark(k, &seq) == 0);
    REQUIRE(seq == k);
  }

  // The 33rd, on a thread of its own, which looks at the held job right after the CS returned.
  std::atomic<bool> returned{false};
  std::atomic<pid_t> cs_tid{0};
  int cs_result = -1;
  uint32_t marker1_after = 0, marker31_after = 0;
  uint64_t seq33 = 0;
  joiner.add(std::thread([&] {
    cs_tid = static_cast<pid_t>(syscall(SYS_gettid));
    cs_result = ring.mark(33, &seq33);
    marker1_after = ring.marker(1);
    marker31_after = ring.marker(31);
    returned = true;
  }));

  SECTION("it returns once the held job has finished") {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    CHECK_FALSE(returned.load());
    // Nothing else waits: the same context on its other SDMA ring, another context on this
    // ring, a query of the blocked context, another file.
    std::vector<uint32_t> nop;
    sdma::nop(nop);
    const uint64_t nop_va = place_ib(buf, 48 * 1024, nop);
    uint64_t other = 0;
    CHECK(submit(fd.get(), ctx, AMDGPU_HW_IP_DMA, 1, nop_va, 4, &other) == 0);
    CHECK(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_DMA, 1, other, abs_timeout_ms(5000)) == 0);
    uint32_t ctx2 = 0;
    REQUIRE(ctx_create(fd.get(), &ctx2) == 0);
    CHECK(submit(fd.get(), ctx2, AMDGPU_HW_IP_DMA, 0, nop_va, 4, &other) == 0);
    CHECK(ctx_state2(fd.get(), ctx) == 0);
    CHECK(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, held, 0) == 1);
    Fd fd2 = open_render();
    REQUIRE(fd2.get() >= 0);
    GpuBuffer buf2;
    REQUIRE(buf2.create(fd2.get(), 4096, 0x800000) == 0);
    uint32_t c2 = 0;
    REQUIRE(ctx_create(fd2.get(), &c2) == 0);
    // (its ring 1: ring 0 is the device's, where the held job runs)
    CHECK(submit(fd2.get(), c2, AMDGPU_HW_IP_DMA, 1, place_ib(buf2, 0, nop), 4, &other) == 0);
    CHECK(wait_cs(fd2.get(), c2, AMDGPU_HW_IP_DMA, 1, other, abs_timeout_ms(5000)) == 0);
    CHECK_FALSE(returned.load());

    joiner.join();
    CHECK(cs_result == 0);
    CHECK(seq33 == 33);
    CHECK(marker1_after == 1);  // the held job had run to its end when the CS returned
    CHECK(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, seq33, abs_timeout_ms(5000)) == 0);
    CHECK(ring.marker(33) == 33);
  }
  SECTION("a FREE_CTX meanwhile returns at once; the CS still submits, then releases") {
    // amdgpu_ctx_free() drops only the handle's reference: the CS holds one (amdgpu_ctx_get() in
    // amdgpu_cs_parser_init()), so the release, and its wait for the entities, happens at the
    // CS's end (amdgpu_cs_parser_fini() -> amdgpu_ctx_put()).
    // First the CS must be asleep in its wait (it has its reference then).
    REQUIRE(eventually([&] { return cs_tid.load() && sleeps_in_futex(cs_tid.load()); }));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    REQUIRE(sleeps_in_futex(cs_tid.load()));
    std::atomic<bool> freed{false};
    int free_result = -1;
    joiner.add(std::thread([&] {
      free_result = ctx_free(fd.get(), ctx);
      freed = true;
    }));
    CHECK(eventually([&] { return freed.load(); }));
    CHECK_FALSE(returned.load());
    joiner.join();
    CHECK(free_result == 0);
    CHECK(cs_result == 0);
    CHECK(seq33 == 33);
    // The CS returned once job 33 was on the ring: 32 running, so 31 had finished.
    CHECK(marker31_after == 31);
    CHECK(eventually([&] { return ring.marker(33) == 33; }));
  }
}

// The same wait for a hung job: its fence signals when the job timeout handler ends it.
TEST_CASE("a CS past 32 unfinished jobs waits for a hung job until the timeout handler ends it",
          "[kernel][cs][block]") {
  Knob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "500", "2000");
  Knob hang("RVGL_EMU_HANG_JOB", "1", "0");
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  GpuBuffer buf;
  REQUIRE(buf.create(fd.get(), 64 * 1024, 0x800000) == 0);
  uint32_t ctx = 0;
  REQUIRE(ctx_create(fd.get(), &ctx) == 0);
  const HeldSdmaRing ring{fd.get(), ctx, buf};
  uint64_t seq = 0;
  for (uint32_t k = 1; k <= 32; ++k)
    REQUIRE(ring.mark(k, &seq) == 0);
  int cs_result = -1;
  uint64_t flags_after = 0;
  std::thread cs([&] {
    cs_result = ring.mark(33, &seq);
    flags_after = ctx_state2(fd.get(), ctx);
  });
  cs.join();
  // The timeout handler had ended the hung job when the CS returned: the context was guilty (it
  // is marked before the job's fence signals). The CS was past the guilty check
  // (amdgpu_cs_parser_init) by then: it succeeded, and its job is cancelled.
  CHECK((flags_after & AMDGPU_CTX_QUERY2_FLAGS_GUILTY) != 0);
  CHECK(cs_result == 0);
  CHECK(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, 33, abs_timeout_ms(5000)) == -ECANCELED);
  CHECK(ring.mark(34, &seq) == -ECANCELED);
}

// amdgpu_ctx.c amdgpu_ctx_free(): under mgr->lock, kref_put(amdgpu_ctx_do_release) ->
// drm_sched_entity_destroy() -> drm_sched_entity_flush(): for a process that is not exiting,
// wait_event_killable(sched->job_scheduled, drm_sched_entity_is_idle(entity)), no timeout. A job
// leaves the entity when the scheduler pushes it to the ring: its dependencies signaled and room
// on the ring (amdgpu_sched_hw_submission: 2 jobs). Meanwhile every look-up of a context of that
// file waits for mgr->lock; other files do not.
TEST_CASE("FREE_CTX waits until the context's queued jobs have gone to the ring",
          "[kernel][ctx][block]") {
  Knob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "30000", "2000");
  Fd fd = open_render();
  REQUIRE(fd.get() >= 0);
  GpuBuffer buf;
  REQUIRE(buf.create(fd.get(), 64 * 1024, 0x800000) == 0);
  uint32_t ctx = 0, bystander = 0;
  REQUIRE(ctx_create(fd.get(), &ctx) == 0);
  REQUIRE(ctx_create(fd.get(), &bystander) == 0);
  const HeldSdmaRing ring{fd.get(), ctx, buf};
  Joiner joiner([&] { ring.open_gate(); });
  ring.hold();
  // Jobs 2..5 behind it: 2 is the ring's second job; 3, 4 and 5 stay in the entity.
  uint64_t seq = 0;
  for (uint32_t k = 2; k <= 5; ++k)
    REQUIRE(ring.mark(k, &seq) == 0);

  std::atomic<bool> freed{false}, queried{false};
  int free_result = -1;
  uint32_t job3_at_free = 0, job3_at_query = 0;
  uint64_t bystander_flags = ~0ull;
  joiner.add(std::thread([&] {
    free_result = ctx_free(fd.get(), ctx);
    job3_at_free = ring.marker(3);
    freed = true;
  }));
  // Once the handle is gone the FREE_CTX holds mgr->lock: a query of another context waits.
  REQUIRE(eventually([&] { return file_contexts(fd.get()) == 1; }));
  joiner.add(std::thread([&] {
    bystander_flags = ctx_state2(fd.get(), bystander);
    job3_at_query = ring.marker(3);
    queried = true;
  }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK_FALSE(freed.load());
  CHECK_FALSE(queried.load());
  // Another file is not held up.
  Fd fd2 = open_render();
  REQUIRE(fd2.get() >= 0);
  GpuBuffer buf2;
  REQUIRE(buf2.create(fd2.get(), 4096, 0x800000) == 0);
  uint32_t c2 = 0;
  REQUIRE(ctx_create(fd2.get(), &c2) == 0);
  std::vector<uint32_t> nop;
  sdma::nop(nop);
  REQUIRE(submit(fd2.get(), c2, AMDGPU_HW_IP_DMA, 1, place_ib(buf2, 0, nop), 4, &seq) == 0);
  CHECK(wait_cs(fd2.get(), c2, AMDGPU_HW_IP_DMA, 1, seq, abs_timeout_ms(5000)) == 0);
  CHECK(ctx_state2(fd2.get(), c2) == 0);
  CHECK_FALSE(freed.load());
  CHECK(ring.marker(2) == 0);

  joiner.join();
  CHECK(free_result == 0);
  CHECK(bystander_flags == 0);
  // Job 5 went to the ring when job 3 had finished (4 running): the FREE_CTX returned after that,
  // the query after the FREE_CTX had let go of mgr->lock.
  CHECK(job3_at_free == 3);
  CHECK(job3_at_query == 3);
  CHECK(eventually([&] { return ring.marker(5) == 5; }));  // the freed context's jobs still run
  CHECK(ctx_free(fd.get(), ctx) == -EINVAL);
}

// A file with a buffer for IBs and a 4 KiB GTT object mapped at kVa: what the VM tests take
// away while a job is held.
struct TargetVm {
  static constexpr uint64_t kVa = 0x2000000;
  Fd fd;
  GpuBuffer buf;
  uint32_t target = 0;
  TargetVm() : fd(open_render()) {
    REQUIRE(fd.get() >= 0);
    REQUIRE(buf.create(fd.get(), 64 * 1024, 0x800000) == 0);
    REQUIRE(gem_create(fd.get(), 4096, AMDGPU_GEM_DOMAIN_GTT, 0, &target) == 0);
    REQUIRE(gem_va(fd.get(), AMDGPU_VA_OP_MAP, target, kVa, 0, 4096) == 0);
  }
};

// amdgpu_vm.c amdgpu_vm_clear_freed(): "Implicitly sync to command submissions in the same VM
// before unmapping" (amdgpu_sync_resv(..., AMDGPU_SYNC_EQ_OWNER) on the root page directory's
// reservation, which every CS of the VM fences): the page-table entries of an unmapped range stay
// until the VM's jobs in flight are done, so those jobs still reach the memory; a job submitted
// after the unmap does not. The same for a range cleared (AMDGPU_VA_OP_CLEAR) and for the mappings
// of an object whose last handle closes (amdgpu_gem_object_close() -> amdgpu_vm_bo_del()).
TEST_CASE("an unmapped range stays visible to the VM's jobs submitted before the unmap",
          "[kernel][vm]") {
  Knob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "30000", "2000");
  Knob stop("RVGL_EMU_VM_FAULT_STOP", "2", "0");
  TargetVm vm;
  Fd &fd = vm.fd;  // references, not a structured binding: clang 14 lambdas cannot capture one
  GpuBuffer &buf = vm.buf;
  uint32_t &target = vm.target;
  constexpr uint64_t kTargetVa = TargetVm::kVa;
  auto *words = static_cast<uint32_t *>(gem_cpu_map(fd.get(), target, 4096));
  REQUIRE(words != nullptr);
  uint32_t ctx = 0, later = 0, after_done = 0;
  REQUIRE(ctx_create(fd.get(), &ctx) == 0);
  REQUIRE(ctx_create(fd.get(), &later) == 0);
  REQUIRE(ctx_create(fd.get(), &after_done) == 0);
  const HeldSdmaRing ring{fd.get(), ctx, buf};
  Joiner joiner([&] { ring.open_gate(); });
  ring.hold();
  // Job 2, behind the gate: a write into the target.
  std::vector<uint32_t> ib;
  sdma::write(ib, kTargetVa, {0x1111});
  uint64_t before_seq = 0;
  REQUIRE(submit(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, place_ib(buf, 4096, ib), ib.size() * 4,
                 &before_seq) == 0);

  SECTION("GEM_VA UNMAP") {
    REQUIRE(gem_va(fd.get(), AMDGPU_VA_OP_UNMAP, target, kTargetVa, 0, 4096) == 0);
  }
  SECTION("GEM_VA CLEAR") {
    REQUIRE(gem_va(fd.get(), AMDGPU_VA_OP_CLEAR, 0, kTargetVa, 0, 4096) == 0);
  }
  SECTION("the object's last handle closed") {
    REQUIRE(gem_close(fd.get(), target) == 0);
    target = 0;
  }
  // A job submitted after it (another context, another ring: it runs now) faults.
  auto write_after = [&](uint32_t c, uint32_t value, uint64_t ib_at) {
    std::vector<uint32_t> w;
    sdma::write(w, kTargetVa + 4, {value});
    uint64_t seq = 0;
    REQUIRE(submit(fd.get(), c, AMDGPU_HW_IP_DMA, 1, place_ib(buf, ib_at, w), w.size() * 4, &seq) ==
            0);
    return wait_cs(fd.get(), c, AMDGPU_HW_IP_DMA, 1, seq, abs_timeout_ms(5000));
  };
  CHECK(write_after(later, 0x2222, 8192) == -ETIME);
  CHECK(words[1] == 0);

  ring.open_gate();
  CHECK(wait_cs(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, before_seq, abs_timeout_ms(5000)) == 0);
  CHECK(words[0] == 0x1111);  // the job from before the unmap wrote through its old mapping
  // Its jobs done, the range is gone for everyone.
  CHECK(write_after(after_done, 0x3333, 12288) == -ETIME);
  CHECK(words[1] == 0);
  munmap(words, 4096);
  if (target) gem_close(fd.get(), target);
}

// Linux 6.16's GEM_VA vm_timeline_syncobj_out: the operation's page-table update as a syncobj
// point (amdgpu_gem_update_timeline_node(), amdgpu_gem_va_update_vm()). An unmap's update runs
// after the VM's jobs submitted before it, so its point does too.
TEST_CASE("GEM_VA puts its page-table update into the VM-timeline syncobj", "[kernel][vm]") {
  Knob lockup("RVGL_EMU_LOCKUP_TIMEOUT_MS", "30000", "2000");
  TargetVm vm;
  Fd &fd = vm.fd;  // references, not a structured binding: clang 14 lambdas cannot capture one
  GpuBuffer &buf = vm.buf;
  uint32_t &target = vm.target;
  constexpr uint64_t kTargetVa = TargetVm::kVa;
  uint32_t syncobj = 0;
  REQUIRE(drmSyncobjCreate(fd.get(), 0, &syncobj) == 0);
  auto va_op = [&](uint32_t op, uint32_t flags, uint32_t out, uint64_t point, uint32_t inputs = 0) {
    rvgl_drm_amdgpu_gem_va a{};
    a.handle = target;
    a.operation = op;
    a.flags = flags | AMDGPU_VM_PAGE_READABLE | AMDGPU_VM_PAGE_WRITEABLE;
    a.va_address = kTargetVa;
    a.map_size = 4096;
    a.vm_timeline_point = point;
    a.vm_timeline_syncobj_out = out;
    a.num_syncobj_handles = inputs;
    return xioctl(fd.get(), RVGL_DRM_IOCTL_AMDGPU_GEM_VA, &a);
  };
  auto reached = [&](uint64_t point, uint64_t ms) {
    return drmSyncobjTimelineWait(fd.get(), &syncobj, &point, 1, abs_timeout_ms(ms), 0, nullptr);
  };
  // Refused before anything is done: an unknown syncobj; input fences (not modelled).
  CHECK(va_op(AMDGPU_VA_OP_UNMAP, 0, 99, 1) == -ENOENT);
  CHECK(va_op(AMDGPU_VA_OP_UNMAP, 0, syncobj, 1, 1) == -EINVAL);
  // An update delayed to the next CS runs none now: the operation is done, no point added (a
  // wait without WAIT_FOR_SUBMIT says so).
  CHECK(va_op(AMDGPU_VA_OP_REPLACE, AMDGPU_VM_DELAY_UPDATE, syncobj, 1) == 0);
  CHECK(reached(1, 0) == -EINVAL);

  uint32_t ctx = 0;
  REQUIRE(ctx_create(fd.get(), &ctx) == 0);
  const HeldSdmaRing ring{fd.get(), ctx, buf};
  Joiner joiner([&] { ring.open_gate(); });
  ring.hold();
  REQUIRE(va_op(AMDGPU_VA_OP_UNMAP, 0, syncobj, 1) == 0);
  CHECK(reached(1, 50) == -ETIME);  // the held job came first
  ring.open_gate();
  CHECK(reached(1, 5000) == 0);
  // With nothing before it the update has run by the time the ioctl returns.
  REQUIRE(va_op(AMDGPU_VA_OP_MAP, 0, syncobj, 2) == 0);
  CHECK(reached(2, 0) == 0);
  drmSyncobjDestroy(fd.get(), syncobj);
}
