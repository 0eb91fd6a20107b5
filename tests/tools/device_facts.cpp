#include "device_facts.h"

#include <amdgpu.h>
#include <amdgpu_drm.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

namespace rvgl::tools_test {

namespace {

class Device {
 public:
  explicit Device(const std::string &node) {
    fd_ = ::open(node.c_str(), O_RDWR | O_CLOEXEC);
    if (fd_ < 0) throw std::runtime_error("cannot open " + node);
    uint32_t major, minor;
    if (amdgpu_device_initialize(fd_, &major, &minor, &dev_)) {
      ::close(fd_);
      throw std::runtime_error("amdgpu_device_initialize failed on " + node);
    }
  }
  ~Device() {
    amdgpu_device_deinitialize(dev_);
    ::close(fd_);
  }
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;
  amdgpu_device_handle get() const { return dev_; }

 private:
  int fd_ = -1;
  amdgpu_device_handle dev_ = nullptr;
};

void check(int r, const char *what) {
  if (r) throw std::runtime_error(std::string(what) + " failed: " + std::to_string(r));
}

}  // namespace

DeviceFacts query_device_facts(const std::string &render_node) {
  Device dev(render_node);
  DeviceFacts f;
  drm_amdgpu_info_device info{};
  check(amdgpu_query_info(dev.get(), AMDGPU_INFO_DEV_INFO, sizeof(info), &info), "DEV_INFO");
  f.device_id = info.device_id;
  f.pci_rev = info.pci_rev;
  f.family = info.family;
  f.external_rev = info.external_rev;
  f.cu_active_number = info.cu_active_number;
  f.num_shader_engines = info.num_shader_engines;
  f.wave_front_size = info.wave_front_size;
  f.gpu_counter_freq = info.gpu_counter_freq;
  f.max_engine_clock = info.max_engine_clock;
  f.virtual_address_offset = info.virtual_address_offset;
  f.virtual_address_max = info.virtual_address_max;
  drm_amdgpu_memory_info mem{};
  check(amdgpu_query_info(dev.get(), AMDGPU_INFO_MEMORY, sizeof(mem), &mem), "MEMORY");
  f.vram = mem.vram.total_heap_size;
  f.visible_vram = mem.cpu_accessible_vram.total_heap_size;
  f.gtt = mem.gtt.total_heap_size;
  drm_amdgpu_info_hw_ip ip{};
  check(amdgpu_query_hw_ip_info(dev.get(), AMDGPU_HW_IP_COMPUTE, 0, &ip), "HW_IP_INFO compute");
  f.compute_ip_major = ip.hw_ip_version_major;
  f.compute_ip_minor = ip.hw_ip_version_minor;
  f.compute_rings = __builtin_popcount(ip.available_rings);
  check(amdgpu_query_hw_ip_info(dev.get(), AMDGPU_HW_IP_DMA, 0, &ip), "HW_IP_INFO DMA");
  f.sdma_rings = __builtin_popcount(ip.available_rings);
  const char *name = amdgpu_get_marketing_name(dev.get());
  f.marketing_name = name ? name : "AMD Radeon Graphics";
  // The partition's XCCs as amdgpu_xcp.c reports them; a part without partitions has one.
  const std::string node = render_node.substr(render_node.find_last_of('/') + 1);
  const std::string xcc =
      "/sys/class/drm/" + node + "/device/compute_partition_config/xcc/num_inst";
  if (FILE *file = std::fopen(xcc.c_str(), "re")) {
    unsigned n = 0;
    if (std::fscanf(file, "%u", &n) == 1) f.xcc_per_xcp = n;
    std::fclose(file);
  }
  return f;
}

}  // namespace rvgl::tools_test
