#include "direct_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <xf86drm.h>

#include <amdgpu_drm.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <string>

namespace rvgl::bench {

namespace {

void check(int r, const char *what) {
  if (r) throw std::runtime_error(std::string("direct file: ") + what + ": " + std::to_string(r));
}

// Where the buffer is bound: any page-aligned address in the VM's usable range
// (AMDGPU_VA_RESERVED_BOTTOM and up, below the 48-bit hole) will do for a file of our own.
constexpr uint64_t kBufferVa = 1ull << 32;

}  // namespace

DirectFile::DirectFile(uint32_t contexts) : fd_(::open("/dev/dri/renderD128", O_RDWR | O_CLOEXEC)) {
  if (!fd_) throw std::runtime_error("direct file: no render node");
  for (uint32_t i = 0; i < contexts; ++i) {
    drm_amdgpu_ctx ctx{};
    ctx.in.op = AMDGPU_CTX_OP_ALLOC_CTX;
    ctx.in.priority = AMDGPU_CTX_PRIORITY_NORMAL;
    check(drmCommandWriteRead(fd_.get(), DRM_AMDGPU_CTX, &ctx, sizeof ctx), "CTX");
    ctx_ids_.push_back(ctx.out.alloc.ctx_id);
  }
  // Always valid in this file's VM, as DirectBuffer makes its objects: no BO list on a CS.
  drm_amdgpu_gem_create create{};
  create.in.bo_size = kBufferSize;
  create.in.alignment = 4096;
  create.in.domains = AMDGPU_GEM_DOMAIN_GTT;
  create.in.domain_flags = AMDGPU_GEM_CREATE_VM_ALWAYS_VALID;
  check(drmCommandWriteRead(fd_.get(), DRM_AMDGPU_GEM_CREATE, &create, sizeof create),
        "GEM_CREATE");
  drm_amdgpu_gem_va va{};
  va.handle = create.out.handle;
  va.operation = AMDGPU_VA_OP_MAP;
  va.flags = AMDGPU_VM_PAGE_READABLE | AMDGPU_VM_PAGE_WRITEABLE | AMDGPU_VM_PAGE_EXECUTABLE;
  va.va_address = kBufferVa;
  va.map_size = kBufferSize;
  check(drmCommandWriteRead(fd_.get(), DRM_AMDGPU_GEM_VA, &va, sizeof va), "GEM_VA");
  va_ = kBufferVa;
  drm_amdgpu_gem_mmap mmap_args{};
  mmap_args.in.handle = create.out.handle;
  check(drmCommandWriteRead(fd_.get(), DRM_AMDGPU_GEM_MMAP, &mmap_args, sizeof mmap_args),
        "GEM_MMAP");
  void *p = mmap(nullptr, kBufferSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(),
                 static_cast<off_t>(mmap_args.out.addr_ptr));
  if (p == MAP_FAILED) check(-errno, "mmap");
  cpu_ = p;
}

DirectFile::~DirectFile() {
  // Closing the file frees its contexts, mappings and objects, as a process's exit does.
  if (cpu_) munmap(cpu_, kBufferSize);
}

void DirectFile::submit(uint32_t ctx, uint32_t ring, uint64_t ib_va, uint32_t dwords) {
  drm_amdgpu_cs_chunk_ib ib{};
  ib.va_start = ib_va;
  ib.ib_bytes = dwords * 4;
  ib.ip_type = AMDGPU_HW_IP_COMPUTE;
  ib.ring = ring;
  drm_amdgpu_cs_chunk chunk{AMDGPU_CHUNK_ID_IB, sizeof(ib) / 4, reinterpret_cast<uintptr_t>(&ib)};
  const uint64_t chunks[1] = {reinterpret_cast<uintptr_t>(&chunk)};
  const uint32_t ctx_id = ctx_ids_.at(ctx);
  drm_amdgpu_cs cs{};
  cs.in.ctx_id = ctx_id;
  cs.in.num_chunks = 1;
  cs.in.chunks = reinterpret_cast<uintptr_t>(chunks);
  check(drmCommandWriteRead(fd_.get(), DRM_AMDGPU_CS, &cs, sizeof cs), "CS");
  auto it = std::find_if(last_.begin(), last_.end(),
                         [&](const Last &l) { return l.ctx_id == ctx_id && l.ring == ring; });
  if (it == last_.end())
    last_.push_back({ctx_id, ring, cs.out.handle});
  else
    it->seq = cs.out.handle;
}

void DirectFile::wait_all() {
  if (last_.empty()) return;
  std::vector<drm_amdgpu_fence> fences;
  for (const Last &l : last_) {
    drm_amdgpu_fence f{};
    f.ctx_id = l.ctx_id;
    f.ip_type = AMDGPU_HW_IP_COMPUTE;
    f.ring = l.ring;
    f.seq_no = l.seq;
    fences.push_back(f);
  }
  drm_amdgpu_wait_fences w{};
  w.in.fences = reinterpret_cast<uintptr_t>(fences.data());
  w.in.fence_count = static_cast<uint32_t>(fences.size());
  w.in.wait_all = 1;
  w.in.timeout_ns = UINT64_MAX;  // absolute: never
  check(drmCommandWriteRead(fd_.get(), DRM_AMDGPU_WAIT_FENCES, &w, sizeof w), "WAIT_FENCES");
  if (!w.out.status) throw std::runtime_error("direct file: fences did not signal");
  last_.clear();
}

}  // namespace rvgl::bench
