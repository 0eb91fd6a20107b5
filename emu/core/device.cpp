#include "core/device.h"

#include <amdgpu_drm.h>

#include <algorithm>

namespace rvgl::emu {

Device::Device(int index, const Config &cfg)
    : index_(index),
      profile_(*cfg.profile),
      xccs_(cfg.xcc_count()),
      drm_minor_(cfg.drm_minor),
      memory_(std::make_shared<MemoryAccount>(cfg.vram(), cfg.gtt(), cfg.profile->doorbell_bytes,
                                              cfg.profile->vram_pinned_mib << 20,
                                              cfg.profile->gtt_pinned_mib << 20)),
      spm_(index,
           SpmLayout{cfg.profile->spm_global_lines, cfg.profile->spm_se_lines,
                     cfg.profile->shader_engines_per_xcc},
           cfg.xcc_count()) {}

Device::~Device() {
  stop_rings();
}

const IpBlock *Device::ip_block(uint32_t ip) const {
  switch (ip) {
    case AMDGPU_HW_IP_GFX:
      return profile_.gfx.present ? &profile_.gfx : nullptr;
    case AMDGPU_HW_IP_COMPUTE:
      return profile_.compute.present ? &profile_.compute : nullptr;
    case AMDGPU_HW_IP_DMA:
      return profile_.sdma.present ? &profile_.sdma : nullptr;
    default:
      return nullptr;
  }
}

uint32_t Device::ring_count(uint32_t ip) const {
  const IpBlock *b = ip_block(ip);
  if (!b) return 0;
  uint32_t n = b->rings;
  if ((ip == AMDGPU_HW_IP_DMA && profile_.sdma_rings_per_xcc) ||
      (ip == AMDGPU_HW_IP_COMPUTE && profile_.compute_rings_per_xcc))
    n *= xccs_;
  return std::min<uint32_t>(n, 32);  // available_rings is a 32-bit mask
}

RingWorker &Device::ring(uint32_t ip, uint32_t ring) {
  auto &slot = rings_[{ip, ring}];
  if (!slot) slot = std::make_unique<RingWorker>(ip, profile_, resets_);
  return *slot;
}

void Device::stop_rings() {
  for (auto &[key, w] : rings_)
    w->stop();
}

void Device::forget_after_fork() {
  for (auto &[key, w] : rings_)
    w->forget_after_fork();
  spm_.forget_after_fork();
}

}  // namespace rvgl::emu
