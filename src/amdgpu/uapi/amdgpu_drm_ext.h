/*
 * amdgpu kernel UAPI that Debian 12's libdrm 2.4.114 <amdgpu_drm.h> does not carry.
 *
 * This is the one home of these definitions: src/amdgpu issues them, emu/ implements them.
 * Every structure is laid out exactly as the kernel defines it; sizes and offsets are checked
 * below so a mistake breaks the build rather than the ABI.
 *
 * Sources (facts only):
 *  - torvalds/linux include/uapi/drm/amdgpu_drm.h (user queues 0x16..0x18, INFO 0x23 GPUVM_FAULT,
 *    INFO 0x24 UQ_FW_AREAS, DOMAIN_DOORBELL 0x40, the longer drm_amdgpu_info_device, families).
 *  - the profiler UAPI posted to amd-gfx in Sept 2026 ("[PATCH 01/12] drm/amdgpu: add profiler
 *    UAPI definitions"): DRM_AMDGPU_PROFILER 0x1C and its argument structures.
 *
 * Names carry an RVGL_/rvgl_ prefix where the kernel name might later appear in a system header,
 * so a newer libdrm cannot clash with us.
 */
#ifndef ROCM_VIRGL_AMDGPU_DRM_EXT_H
#define ROCM_VIRGL_AMDGPU_DRM_EXT_H

#include <stddef.h>
#include <stdint.h>

#include <drm.h>
#include <amdgpu_drm.h>

#ifdef __cplusplus
#define RVGL_UAPI_ASSERT(expr, msg) static_assert(expr, msg)
extern "C" {
#else
#define RVGL_UAPI_ASSERT(expr, msg) _Static_assert(expr, msg)
#endif

/* ---- memory domains and families missing from 2.4.114 ---- */
#define RVGL_AMDGPU_GEM_DOMAIN_DOORBELL 0x40u
#define RVGL_AMDGPU_FAMILY_AI 141u        /* Vega10 .. gfx9.4.x (CDNA3 gfx942 reports AI) */
#define RVGL_AMDGPU_FAMILY_GC_11_0_0 145u /* RDNA3 gfx1100 */
#define RVGL_AMDGPU_FAMILY_GC_12_0_0 152u

/* GEM_CREATE flags added after 2.4.114 (AMDGPU_GEM_CREATE_*). */
#define RVGL_AMDGPU_GEM_CREATE_DISCARDABLE (1u << 12)
#define RVGL_AMDGPU_GEM_CREATE_COHERENT (1u << 13)
#define RVGL_AMDGPU_GEM_CREATE_UNCACHED (1u << 14)
#define RVGL_AMDGPU_GEM_CREATE_EXT_COHERENT (1u << 15)
#define RVGL_AMDGPU_GEM_CREATE_GFX12_DCC (1u << 16)

/* GEM_VA flag added after 2.4.114 (AMDGPU_VM_PAGE_NOALLOC). */
#define RVGL_AMDGPU_VM_PAGE_NOALLOC (1u << 9)

/* CTX QUERY_STATE2 flag added after 2.4.114 (AMDGPU_CTX_QUERY2_FLAGS_RESET_IN_PROGRESS). */
#define RVGL_AMDGPU_CTX_QUERY2_FLAGS_RESET_IN_PROGRESS (1u << 5)

/* drm_amdgpu_info_gpuvm_fault.vmhub encoding (AMDGPU_VMHUB_TYPE_* / AMDGPU_VMHUB_IDX_*). */
#define RVGL_AMDGPU_VMHUB_TYPE_MASK 0xffu
#define RVGL_AMDGPU_VMHUB_TYPE_SHIFT 0
#define RVGL_AMDGPU_VMHUB_TYPE_GFX 0u
#define RVGL_AMDGPU_VMHUB_TYPE_MM0 1u
#define RVGL_AMDGPU_VMHUB_TYPE_MM1 2u
#define RVGL_AMDGPU_VMHUB_IDX_MASK 0xff00u
#define RVGL_AMDGPU_VMHUB_IDX_SHIFT 8

/* ---- new ioctl numbers ---- */
#define RVGL_DRM_AMDGPU_USERQ 0x16
#define RVGL_DRM_AMDGPU_USERQ_SIGNAL 0x17
#define RVGL_DRM_AMDGPU_USERQ_WAIT 0x18
#define RVGL_DRM_AMDGPU_PROFILER 0x1C

/* ---- user queues (Linux 6.16+) ---- */
#define RVGL_AMDGPU_USERQ_OP_CREATE 1u
#define RVGL_AMDGPU_USERQ_OP_FREE 2u
/*
 * Queue status (hung, VRAM lost since creation). Proposed on amd-gfx ("drm/amdgpu: add UAPI for
 * user queue query status", Alex Deucher, Aug 2025) and reverted from amd-staging-drm-next until
 * Mesa uses it (Prike Liang, Dec 2025); mainline answers it -EINVAL, as any unknown op
 * (amdgpu_userq_input_args_validate()). Callers treat -EINVAL as "this kernel cannot say".
 */
#define RVGL_AMDGPU_USERQ_OP_QUERY_STATUS 3u
#define RVGL_AMDGPU_USERQ_QUERY_STATUS_FLAGS_HUNG (1u << 0)
#define RVGL_AMDGPU_USERQ_QUERY_STATUS_FLAGS_VRAMLOST (1u << 1)

/*
 * Doorbells of compute, SDMA and GFX user queues are 64 bits wide: doorbell_offset counts 8-byte
 * doorbells inside the doorbell object, and (offset + 1) * 8 must not pass its end
 * (amdgpu_userq_get_doorbell_index(): db_size = sizeof(u64)). The queue's absolute doorbell is
 * amdgpu_doorbell_index_on_bar(bo, offset, 8); two queues on one doorbell: -EBUSY (xa_insert).
 */
#define RVGL_AMDGPU_USERQ_DOORBELL_SIZE 8u

#define RVGL_AMDGPU_USERQ_CREATE_FLAGS_QUEUE_PRIORITY_MASK 0x3u
#define RVGL_AMDGPU_USERQ_CREATE_FLAGS_QUEUE_PRIORITY_NORMAL_LOW 0u
#define RVGL_AMDGPU_USERQ_CREATE_FLAGS_QUEUE_PRIORITY_LOW 1u
#define RVGL_AMDGPU_USERQ_CREATE_FLAGS_QUEUE_PRIORITY_NORMAL_HIGH 2u
#define RVGL_AMDGPU_USERQ_CREATE_FLAGS_QUEUE_PRIORITY_HIGH 3u
#define RVGL_AMDGPU_USERQ_CREATE_FLAGS_QUEUE_SECURE (1u << 2)

struct rvgl_drm_amdgpu_userq_in {
  __u32 op;
  __u32 queue_id;
  __u32 ip_type;
  __u32 doorbell_handle;
  __u32 doorbell_offset; /* index of a 64-bit doorbell in the object (not a dword index) */
  __u32 flags;
  __u64 queue_va;
  __u64 queue_size;
  __u64 rptr_va;
  __u64 wptr_va;
  __u64 mqd;      /* user pointer to the IP specific MQD */
  __u64 mqd_size; /* must equal the size of that MQD structure */
};

struct rvgl_drm_amdgpu_userq_out {
  __u32 queue_id;
  __u32 _pad;
};

/* Output of RVGL_AMDGPU_USERQ_OP_QUERY_STATUS (drm_amdgpu_userq_out_query_state). */
struct rvgl_drm_amdgpu_userq_out_query_state {
  __u32 flags; /* RVGL_AMDGPU_USERQ_QUERY_STATUS_FLAGS_* */
  __u32 _pad;
};

union rvgl_drm_amdgpu_userq {
  struct rvgl_drm_amdgpu_userq_in in;
  struct rvgl_drm_amdgpu_userq_out out;
  struct rvgl_drm_amdgpu_userq_out_query_state out_qs;
};

struct rvgl_drm_amdgpu_userq_mqd_compute_gfx11 {
  __u64 eop_va;
};

struct rvgl_drm_amdgpu_userq_mqd_sdma_gfx11 {
  __u64 csa_va;
};

struct rvgl_drm_amdgpu_userq_mqd_gfx11 {
  __u64 shadow_va;
  __u64 csa_va;
};
RVGL_UAPI_ASSERT(sizeof(struct rvgl_drm_amdgpu_userq_mqd_gfx11) == 16, "gfx11 mqd size");

#define RVGL_DRM_IOCTL_AMDGPU_USERQ \
  DRM_IOWR(DRM_COMMAND_BASE + RVGL_DRM_AMDGPU_USERQ, union rvgl_drm_amdgpu_userq)

RVGL_UAPI_ASSERT(sizeof(struct rvgl_drm_amdgpu_userq_in) == 72, "userq_in size");
RVGL_UAPI_ASSERT(offsetof(struct rvgl_drm_amdgpu_userq_in, queue_va) == 24, "userq_in.queue_va");
RVGL_UAPI_ASSERT(offsetof(struct rvgl_drm_amdgpu_userq_in, mqd) == 56, "userq_in.mqd");
RVGL_UAPI_ASSERT(sizeof(union rvgl_drm_amdgpu_userq) == 72, "userq size");

/* ---- INFO queries newer than 2.4.114 ---- */
#define RVGL_AMDGPU_INFO_MAX_IBS 0x22u
#define RVGL_AMDGPU_INFO_GPUVM_FAULT 0x23u
#define RVGL_AMDGPU_INFO_UQ_FW_AREAS 0x24u

struct rvgl_drm_amdgpu_info_gpuvm_fault {
  __u64 addr;
  __u32 status;
  __u32 vmhub;
};
RVGL_UAPI_ASSERT(sizeof(struct rvgl_drm_amdgpu_info_gpuvm_fault) == 16, "gpuvm_fault size");

struct rvgl_drm_amdgpu_info_uq_metadata_compute {
  __u32 eop_size;
  __u32 eop_alignment;
};
struct rvgl_drm_amdgpu_info_uq_metadata_sdma {
  __u32 csa_size;
  __u32 csa_alignment;
};
struct rvgl_drm_amdgpu_info_uq_metadata_gfx {
  __u32 shadow_size;
  __u32 shadow_alignment;
  __u32 csa_size;
  __u32 csa_alignment;
};
struct rvgl_drm_amdgpu_info_uq_metadata {
  union {
    struct rvgl_drm_amdgpu_info_uq_metadata_gfx gfx;
    struct rvgl_drm_amdgpu_info_uq_metadata_compute compute;
    struct rvgl_drm_amdgpu_info_uq_metadata_sdma sdma;
  };
};
RVGL_UAPI_ASSERT(sizeof(struct rvgl_drm_amdgpu_info_uq_metadata) == 16, "uq_metadata size");

/*
 * DEV_INFO as current kernels fill it: 2.4.114's struct drm_amdgpu_info_device (368 bytes) followed
 * by the fields added since. The kernel copies min(return_size, its size), so a 2.4.114 caller
 * simply gets the prefix.
 */
struct rvgl_drm_amdgpu_info_device {
  struct drm_amdgpu_info_device base;
  __u64 min_engine_clock;
  __u64 min_memory_clock;
  __u32 tcp_cache_size;
  __u32 num_sqc_per_wgp;
  __u32 sqc_data_cache_size;
  __u32 sqc_inst_cache_size;
  __u32 gl1c_cache_size;
  __u32 gl2c_cache_size;
  __u64 mall_size;
  __u32 enabled_rb_pipes_mask_hi;
  __u32 shadow_size;
  __u32 shadow_alignment;
  __u32 csa_size;
  __u32 csa_alignment;
  __u32 userq_ip_mask; /* 1 << AMDGPU_HW_IP_* for each IP with user queues */
  __u32 pad;
};
RVGL_UAPI_ASSERT(sizeof(struct drm_amdgpu_info_device) == 368, "2.4.114 dev_info size");
RVGL_UAPI_ASSERT(offsetof(struct rvgl_drm_amdgpu_info_device, min_engine_clock) == 368,
                 "dev_info tail starts where 2.4.114 ends");
RVGL_UAPI_ASSERT(offsetof(struct rvgl_drm_amdgpu_info_device, mall_size) == 408, "mall_size");
RVGL_UAPI_ASSERT(offsetof(struct rvgl_drm_amdgpu_info_device, userq_ip_mask) == 436,
                 "userq_ip_mask");
RVGL_UAPI_ASSERT(sizeof(struct rvgl_drm_amdgpu_info_device) == 448, "dev_info size");

/*
 * HW_IP_INFO as current kernels fill it: 2.4.114 has a _pad where the kernel now reports the IP
 * discovery version (bits 23:16 major, 15:8 minor, 7:0 revision), followed by userq_num_slots.
 */
struct rvgl_drm_amdgpu_info_hw_ip {
  __u32 hw_ip_version_major;
  __u32 hw_ip_version_minor;
  __u64 capabilities_flags;
  __u32 ib_start_alignment;
  __u32 ib_size_alignment;
  __u32 available_rings;
  __u32 ip_discovery_version;
  __u32 userq_num_slots;
  __u32 pad;
};
RVGL_UAPI_ASSERT(sizeof(struct drm_amdgpu_info_hw_ip) == 32, "2.4.114 hw_ip size");
RVGL_UAPI_ASSERT(offsetof(struct rvgl_drm_amdgpu_info_hw_ip, ip_discovery_version) == 28,
                 "ip_discovery_version replaces 2.4.114's _pad");
RVGL_UAPI_ASSERT(sizeof(struct rvgl_drm_amdgpu_info_hw_ip) == 40, "hw_ip size");

/* ---- profiler / SPM (seed 000, DRM_AMDGPU_PROFILER 0x1C) ---- */
#define RVGL_AMDGPU_PROFILER_OP_GET_VER 1u
#define RVGL_AMDGPU_PROFILER_OP_SPM 2u

#define RVGL_AMDGPU_SPM_OP_ACQUIRE 1u
#define RVGL_AMDGPU_SPM_OP_RELEASE 2u
#define RVGL_AMDGPU_SPM_OP_SET_DEST_BUF 3u

/* The version GET_VER reports: (MAJOR << 24) | MINOR. */
#define RVGL_AMDGPU_PROFILER_VERSION_MAJOR(v) ((__u32)(v) >> 24)
#define RVGL_AMDGPU_PROFILER_VERSION_MINOR(v) ((__u32)(v)&0xffffffu)

struct rvgl_drm_amdgpu_spm_args {
  __u64 dest_buf; /* user pointer; 0 stops streaming */
  __u32 buf_size;
  __u32 op;
  __u32 timeout;      /* in: ms to wait for the previous buffer; out: ms left */
  __u32 bytes_copied; /* out: bytes written to the previous buffer */
  __u32 has_data_loss;
  __u32 reserved[9];
};
RVGL_UAPI_ASSERT(sizeof(struct rvgl_drm_amdgpu_spm_args) == 64, "spm_args size");
RVGL_UAPI_ASSERT(offsetof(struct rvgl_drm_amdgpu_spm_args, timeout) == 16, "spm_args.timeout");

/* Each XCC's slice of a destination buffer starts with this header. */
struct rvgl_drm_amdgpu_spm_buffer_header {
  __u32 version; /* 0-23 minor, 24-31 major */
  __u32 bytes_copied;
  __u32 has_data_loss;
  __u32 reserved[5];
};
RVGL_UAPI_ASSERT(sizeof(struct rvgl_drm_amdgpu_spm_buffer_header) == 32, "spm header size");

struct rvgl_drm_amdgpu_profiler_args {
  __u32 op;
  __u32 pad;
  union {
    __u32 version;
    struct rvgl_drm_amdgpu_spm_args spm;
  } data;
};
RVGL_UAPI_ASSERT(sizeof(struct rvgl_drm_amdgpu_profiler_args) == 72, "profiler_args size");
RVGL_UAPI_ASSERT(offsetof(struct rvgl_drm_amdgpu_profiler_args, data) == 8, "profiler_args.data");

/*
 * The series gives no XCP field in drm_amdgpu_spm_args; the XCP is the partition the render node
 * belongs to (one node per XCP in partitioned modes). Our emulator follows that: each node is one
 * XCP.
 */
#define RVGL_DRM_IOCTL_AMDGPU_PROFILER \
  DRM_IOWR(DRM_COMMAND_BASE + RVGL_DRM_AMDGPU_PROFILER, struct rvgl_drm_amdgpu_profiler_args)

/*
 * GEM_VA as Linux 6.16 defines it (the user-queue series, "drm/amdgpu: add vm timeline support"):
 * the 2.4.114 structure followed by a VM-timeline out syncobj and input fences. With
 * vm_timeline_syncobj_out set, the kernel puts the fence of the page-table update the operation
 * made, "the last relevant update for this mapping" (amdgpu_gem_va_update_vm()), into that
 * syncobj at vm_timeline_point (0: as its binary fence); with AMDGPU_VM_DELAY_UPDATE no update
 * runs and no point is added. A kernel with the shorter structure reads its 40 bytes and ignores
 * the rest (drm_ioctl() copies in no more than its own size), so the point then never gets a
 * fence.
 */
struct rvgl_drm_amdgpu_gem_va {
  uint32_t handle;
  uint32_t _pad;
  uint32_t operation;
  uint32_t flags;
  uint64_t va_address;
  uint64_t offset_in_bo;
  uint64_t map_size;
  uint64_t vm_timeline_point;
  uint32_t vm_timeline_syncobj_out;
  uint32_t num_syncobj_handles;
  uint64_t input_fence_syncobj_handles;
};
RVGL_UAPI_ASSERT(sizeof(struct rvgl_drm_amdgpu_gem_va) == 64, "gem_va (6.16) is 64 bytes");
RVGL_UAPI_ASSERT(offsetof(struct rvgl_drm_amdgpu_gem_va, vm_timeline_point) ==
                     sizeof(struct drm_amdgpu_gem_va),
                 "gem_va extends the 2.4.114 structure");
RVGL_UAPI_ASSERT(offsetof(struct rvgl_drm_amdgpu_gem_va, vm_timeline_syncobj_out) == 48,
                 "gem_va.vm_timeline_syncobj_out");
#define RVGL_DRM_IOCTL_AMDGPU_GEM_VA \
  DRM_IOW(DRM_COMMAND_BASE + DRM_AMDGPU_GEM_VA, struct rvgl_drm_amdgpu_gem_va)

#ifdef __cplusplus
}
#endif

/* DRM core, Linux 6.6 (include/uapi/drm/drm.h, drm_syncobj.c drm_syncobj_eventfd_ioctl): signal an
 * eventfd once a syncobj point is signalled (or, with DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE, once
 * it has a fence). libdrm 2.4.114's drm.h predates it. */
struct rvgl_drm_syncobj_eventfd {
  uint32_t handle;
  uint32_t flags;
  uint64_t point;
  int32_t fd;
  uint32_t pad;
};
RVGL_UAPI_ASSERT(sizeof(struct rvgl_drm_syncobj_eventfd) == 24, "drm_syncobj_eventfd is 24 bytes");
#define RVGL_DRM_IOCTL_SYNCOBJ_EVENTFD DRM_IOWR(0xCF, struct rvgl_drm_syncobj_eventfd)

#endif /* ROCM_VIRGL_AMDGPU_DRM_EXT_H */
