#include "amdgpu/device_probe.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

namespace rvgl {

namespace {

// libdrm_amdgpu's amdgpu.ids, looked up as its amdgpu_parse_asic_ids does: lines
// "device_id,\trevision_id,\tproduct_name" in hex, '#' comments, the first line a version.
// Read here rather than through amdgpu_get_marketing_name: that needs amdgpu_device_initialize,
// which in 2.4.114 dereferences a failed drmGetVersion (a crash when an ioctl fails).
std::string marketing_name(uint32_t device_id, uint32_t revision) {
  FILE *f = std::fopen(RVGL_AMDGPU_IDS_PATH, "re");
  if (!f) return {};
  std::string out;
  char line[256];
  bool first = true;
  while (std::fgets(line, sizeof(line), f)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    if (first) {  // the table's version line
      first = false;
      continue;
    }
    unsigned did = 0, rid = 0;
    int name_at = 0;
    if (std::sscanf(line, "%x,%x,%n", &did, &rid, &name_at) != 2 || name_at <= 0) continue;
    if (did != device_id || rid != revision) continue;
    const char *name = line + name_at;
    while (*name == ' ' || *name == '\t')
      ++name;
    out = name;
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r'))
      out.pop_back();
    break;
  }
  std::fclose(f);
  return out;
}

// The node's PCI device in sysfs: /sys/dev/char/<major>:<minor>/device (drm_sysfs.c).
uint32_t partition_xccs(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode)) return 1;
  const std::string path = "/sys/dev/char/" + std::to_string(major(st.st_rdev)) + ":" +
                           std::to_string(minor(st.st_rdev)) +
                           "/device/compute_partition_config/xcc/num_inst";
  FILE *f = std::fopen(path.c_str(), "re");
  if (!f) return 1;  // no compute partitions: one XCC per node
  unsigned n = 0;
  const bool ok = std::fscanf(f, "%u", &n) == 1 && n > 0 && n <= 64;
  std::fclose(f);
  return ok ? n : 1;
}

// What a kernel answers for a query or ioctl it does not have or will not serve this caller:
// drm_ioctl()'s unknown driver ioctl and the driver's unknown query or op (-EINVAL), no such
// ioctl (-ENOTTY), not supported on this device (-EOPNOTSUPP, -ENODEV, -ENOENT), not allowed to
// this process (-EPERM, -EACCES: the profiler's perfmon check).
bool absent(int err) {
  switch (err) {
    case -EINVAL:
    case -ENOTTY:
    case -EOPNOTSUPP:
    case -ENODEV:
    case -ENOENT:
    case -EPERM:
    case -EACCES:
      return true;
    default:
      return false;
  }
}

// IBs per CS by IP, as amdgpu_ring_max_ibs() (amdgpu_ring.c, Linux 6.5+) gives them to
// amdgpu_cs_p1_ib(), which refuses one more with -EINVAL: GFX 192, COMPUTE 125, every other ring
// (SDMA) 49. AMDGPU_INFO_MAX_IBS reports the same; an older kernel, which has no query, has no
// such check either, and these values keep a submit within its ring's space as well.
constexpr uint32_t kMaxIbsCompute = 125;
constexpr uint32_t kMaxIbsOther = 49;

// The kernel copies min(size, its table) (amdgpu_info_ioctl), so asking for the first three IPs
// is safe with any kernel that has the query.
int read_max_ibs(AmdgpuDevice &dev, AmdgpuFacts *f) {
  uint32_t max_ibs[AMDGPU_HW_IP_DMA + 1] = {};
  const int err = dev.query_info(RVGL_AMDGPU_INFO_MAX_IBS, max_ibs, sizeof(max_ibs));
  if (err && !absent(err)) return err;
  const bool known = !err;
  f->max_ibs_compute =
      known && max_ibs[AMDGPU_HW_IP_COMPUTE] ? max_ibs[AMDGPU_HW_IP_COMPUTE] : kMaxIbsCompute;
  f->max_ibs_dma = known && max_ibs[AMDGPU_HW_IP_DMA] ? max_ibs[AMDGPU_HW_IP_DMA] : kMaxIbsOther;
  return 0;
}

}  // namespace

int read_device_facts(AmdgpuDevice &dev, AmdgpuFacts *out) {
  AmdgpuFacts f;
  if (int err = dev.query_dev_info(&f.info)) return err;
  if (int err = dev.query_info(AMDGPU_INFO_MEMORY, &f.memory, sizeof(f.memory))) return err;
  // A feature the kernel does not have answers one of absent()'s errors (an IP without rings
  // answers 0 with available_rings 0); any other failure is the kernel's trouble now, and a
  // context must not quietly offer less than the capset the guest was given: it fails.
  int err = dev.query_hw_ip_info(AMDGPU_HW_IP_COMPUTE, &f.compute);
  if (err && !absent(err)) return err;
  f.has_compute = !err && f.compute.available_rings;
  err = dev.query_hw_ip_info(AMDGPU_HW_IP_DMA, &f.dma);
  if (err && !absent(err)) return err;
  f.has_dma = !err && f.dma.available_rings;
  if (int e = read_max_ibs(dev, &f)) return e;
  if (f.info.userq_ip_mask & (1u << AMDGPU_HW_IP_COMPUTE)) {
    err = dev.query_uq_metadata(AMDGPU_HW_IP_COMPUTE, &f.compute_userq);
    if (err && !absent(err)) return err;
    f.has_compute_userq = !err;
  }
  // An SDMA user queue needs a context save area (mes_userq_mqd_create() validates csa_va over
  // the size AMDGPU_INFO_UQ_FW_AREAS reports): without that size no guest could size it.
  if (f.info.userq_ip_mask & (1u << AMDGPU_HW_IP_DMA)) {
    err = dev.query_uq_metadata(AMDGPU_HW_IP_DMA, &f.sdma_userq);
    if (err && !absent(err)) return err;
    f.has_sdma_userq = !err && f.sdma_userq.sdma.csa_size != 0;
  }
  f.marketing_name = marketing_name(f.info.base.device_id, f.info.base.pci_rev);
  f.xcc_per_xcp = partition_xccs(dev.fd());
  rvgl_drm_amdgpu_profiler_args prof{};
  prof.op = RVGL_AMDGPU_PROFILER_OP_GET_VER;
  err = dev.profiler(&prof);
  if (err && !absent(err)) return err;
  if (!err) {
    f.has_profiler = true;
    f.profiler_version = prof.data.version;
  }
  *out = f;
  return 0;
}

}  // namespace rvgl
