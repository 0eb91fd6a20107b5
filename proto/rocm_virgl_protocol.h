/*
 * rocm-virgl wire protocol, version 1.
 *
 * The only definition of every request, response and shared structure exchanged between a guest
 * compute stack and the rocm-virgl host context type (virtio-gpu capset ROCM, id 8). C11, usable
 * from guest C code and from C++. proto/PROTOCOL.md documents the semantics of each command.
 *
 * Rules for every structure here:
 *  - fixed-width little-endian fields, natural alignment, explicit padding (pad fields are zero);
 *  - sizes are multiples of 8 and checked with static asserts together with key offsets;
 *  - a frozen v1 structure is never changed; later minor versions only append fields to requests
 *    (the host zero-extends short requests) and never grow a v1 response unless the request asks
 *    for it through an appended field.
 */
#ifndef ROCM_VIRGL_PROTOCOL_H
#define ROCM_VIRGL_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define RVGL_STATIC_ASSERT(expr, msg) static_assert(expr, msg)
extern "C" {
#else
#define RVGL_STATIC_ASSERT(expr, msg) _Static_assert(expr, msg)
#endif

#define RVGL_CHECK_SIZE(type, size) RVGL_STATIC_ASSERT(sizeof(type) == (size), #type " size")
#define RVGL_CHECK_OFFSET(type, field, off) \
  RVGL_STATIC_ASSERT(offsetof(type, field) == (off), #type "." #field " offset")

/* ------------------------------------------------------------------------------------------ */
/* Versions and identifiers                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* VIRTIO_GPU_CAPSET_ROCM in the virtio-gpu userptr series (v4+). Hosts may be configured to
 * answer on another id for VMMs that only pass a fixed list. */
#define RVGL_CAPSET_ID 8u
/* The capset version answered by get_cap_set (max_ver) and asked for by the guest. */
#define RVGL_CAPSET_VERSION 1u
/* Layout of framing, shared page and capset. Bumped only for incompatible changes. */
#define RVGL_WIRE_FORMAT_VERSION 1u
#define RVGL_PROTOCOL_MAJOR 1u
#define RVGL_PROTOCOL_MINOR 1u

/* ------------------------------------------------------------------------------------------ */
/* virtio-gpu blob conventions                                                                */
/* ------------------------------------------------------------------------------------------ */

/* blob_mem values (virglrenderer.h VIRGL_RENDERER_BLOB_MEM_*) */
#define RVGL_BLOB_MEM_GUEST 1u
#define RVGL_BLOB_MEM_HOST3D 2u
#define RVGL_BLOB_MEM_HOST3D_GUEST 3u

/* blob_flags (virglrenderer.h, and the virtio-gpu userptr series for 0x8 / 0x10) */
#define RVGL_BLOB_FLAG_USE_MAPPABLE 0x0001u
#define RVGL_BLOB_FLAG_USE_SHAREABLE 0x0002u
#define RVGL_BLOB_FLAG_USE_CROSS_DEVICE 0x0004u
#define RVGL_BLOB_FLAG_USERPTR 0x0008u
#define RVGL_BLOB_FLAG_USERPTR_RDONLY 0x0010u

/* blob_id 0 with blob_mem HOST3D and flags exactly USE_MAPPABLE creates the shared page. */
#define RVGL_BLOB_ID_SHMEM 0u

/* ------------------------------------------------------------------------------------------ */
/* Ring indices (virtio-gpu context fences)                                                   */
/* ------------------------------------------------------------------------------------------ */

#define RVGL_RING_CPU 0u         /* retired once every request submitted before it is processed */
#define RVGL_RING_FIRST_QUEUE 1u /* rings 1..62 bind a queue or the SPM stream */
#define RVGL_RING_LAST_QUEUE 62u
#define RVGL_RING_EVENTS 63u /* retired when a new event record is written */
#define RVGL_RING_COUNT 64u

/* ------------------------------------------------------------------------------------------ */
/* Capset payload (capset id RVGL_CAPSET_ID, version RVGL_CAPSET_VERSION)                      */
/* ------------------------------------------------------------------------------------------ */

#define RVGL_FEATURE_USERPTR (1ull << 0)         /* GUEST blobs with RVGL_BLOB_FLAG_USERPTR */
#define RVGL_FEATURE_USERPTR_RDONLY (1ull << 1)  /* ... and RVGL_BLOB_FLAG_USERPTR_RDONLY */
#define RVGL_FEATURE_KERNEL_QUEUES (1ull << 2)   /* RVGL_QUEUE_KIND_KERNEL */
#define RVGL_FEATURE_USER_QUEUES (1ull << 3)     /* RVGL_QUEUE_KIND_USER */
#define RVGL_FEATURE_SPM (1ull << 4)             /* SPM_* commands */
#define RVGL_FEATURE_EVENT_RING (1ull << 5)      /* event records in the shared page */
#define RVGL_FEATURE_RESOURCE_IMPORT (1ull << 6) /* attach resources of other context types */

/* Bits of kernel_queue_ip_mask / user_queue_ip_mask: 1u << RVGL_IP_* */
#define RVGL_IP_COMPUTE 1u
#define RVGL_IP_SDMA 2u

#define RVGL_MARKETING_NAME_SIZE 64u

struct rvgl_capset {
  uint32_t wire_format_version; /* RVGL_WIRE_FORMAT_VERSION */
  uint16_t protocol_major;      /* RVGL_PROTOCOL_MAJOR */
  uint16_t protocol_minor;      /* RVGL_PROTOCOL_MINOR */
  uint64_t features;            /* RVGL_FEATURE_* */

  /* protocol limits of this host */
  uint32_t shmem_size;           /* size the shared page blob must have: RVGL_SHMEM_SIZE */
  uint32_t max_submit_bytes;     /* largest command buffer accepted by one submit */
  uint32_t max_ibs_per_submit;   /* largest SUBMIT.num_ibs */
  uint32_t max_waits_per_submit; /* largest SUBMIT.num_waits */

  /* the device */
  uint32_t pci_vendor_id;
  uint32_t pci_device_id;
  uint32_t pci_revision_id;
  uint32_t family; /* AMDGPU_FAMILY_* of the kernel UAPI */
  uint32_t chip_external_rev;
  uint32_t gfx_ip_major; /* e.g. 11.0.0 for gfx1100, 9.4.3 for gfx942 */
  uint32_t gfx_ip_minor;
  uint32_t gfx_ip_stepping;
  uint32_t num_cu;
  uint32_t num_shader_engines;
  uint32_t wave_size;
  uint32_t gpu_counter_freq_khz; /* timestamp counter frequency */
  uint32_t max_engine_clock_khz;
  uint32_t num_xcp; /* SPM partitions a guest may name (SPM_* .xcp < num_xcp) */
  uint32_t num_xcc; /* compute dies per XCP */
  uint32_t kernel_queue_ip_mask;
  uint32_t user_queue_ip_mask;
  uint32_t spm_version; /* host kernel profiler version ((major << 24) | minor), 0 = none */
  uint64_t vram_size;
  uint64_t visible_vram_size;
  uint64_t gtt_size;
  uint64_t va_start; /* the guest owns GPU VA [va_start, va_end) */
  uint64_t va_end;
  uint32_t va_alignment; /* VA_MAP va, offset and size are multiples of this */
  uint32_t num_compute_rings;
  uint32_t num_sdma_rings;
  uint32_t userq_eop_size; /* user compute queues: EOP buffer size and alignment */
  uint32_t userq_eop_alignment;
  uint32_t pad0;
  char marketing_name[RVGL_MARKETING_NAME_SIZE]; /* NUL-terminated */
  /* Protocol 1.1: user SDMA queues: context save area (QUEUE_CREATE.eop_va) size and alignment;
   * 0 from a 1.0 host. */
  uint32_t userq_sdma_csa_size;
  uint32_t userq_sdma_csa_alignment;
  uint32_t reserved[4];
};
RVGL_CHECK_SIZE(struct rvgl_capset, 256);
RVGL_CHECK_OFFSET(struct rvgl_capset, features, 8);
RVGL_CHECK_OFFSET(struct rvgl_capset, pci_vendor_id, 32);
RVGL_CHECK_OFFSET(struct rvgl_capset, vram_size, 104);
RVGL_CHECK_OFFSET(struct rvgl_capset, va_start, 128);
RVGL_CHECK_OFFSET(struct rvgl_capset, va_alignment, 144);
RVGL_CHECK_OFFSET(struct rvgl_capset, marketing_name, 168);
RVGL_CHECK_OFFSET(struct rvgl_capset, userq_sdma_csa_size, 232);
RVGL_CHECK_OFFSET(struct rvgl_capset, userq_sdma_csa_alignment, 236);
RVGL_CHECK_OFFSET(struct rvgl_capset, reserved, 240);

/* ------------------------------------------------------------------------------------------ */
/* Shared page (blob_id 0)                                                                     */
/* ------------------------------------------------------------------------------------------ */

#define RVGL_SHMEM_SIZE 65536u
#define RVGL_SHMEM_HEADER_SIZE 64u
#define RVGL_EVENT_RING_OFFSET 4096u
#define RVGL_EVENT_RING_ENTRIES 128u /* a power of two */
#define RVGL_RSP_AREA_OFFSET 8192u
#define RVGL_RSP_AREA_SIZE (RVGL_SHMEM_SIZE - RVGL_RSP_AREA_OFFSET)

/* Written by the host unless marked "guest". All counters wrap modulo 2^32. */
struct rvgl_shmem_header {
  uint32_t seqno;          /* seqno of the last request processed; stored after its response,
                            * except for a deferred one (SPM_SET_DEST): stored once accepted,
                            * its response comes later (check the response's own seqno) */
  uint32_t async_error;    /* bad frames + failed requests that had no response slot */
  uint32_t event_wptr;     /* number of event records ever written */
  uint32_t event_overflow; /* records dropped because the ring was full */
  uint32_t event_rptr;     /* guest: number of event records consumed */
  uint32_t layout_version; /* RVGL_WIRE_FORMAT_VERSION */
  uint32_t rsp_area_offset;
  uint32_t rsp_area_size;
  uint32_t event_ring_offset;
  uint32_t event_ring_entries;
  uint32_t reserved[6];
};
RVGL_CHECK_SIZE(struct rvgl_shmem_header, RVGL_SHMEM_HEADER_SIZE);
RVGL_CHECK_OFFSET(struct rvgl_shmem_header, async_error, 4);
RVGL_CHECK_OFFSET(struct rvgl_shmem_header, event_rptr, 16);

/* Event record types */
#define RVGL_EVENT_QUEUE_RESET 1u   /* payload[0]: RVGL_EVENT_RESET_*; payload[1]: last good seq */
#define RVGL_EVENT_DEVICE_RESET 2u  /* payload[0]: RVGL_EVENT_RESET_* (VRAM_LOST) */
#define RVGL_EVENT_VM_FAULT 3u      /* payload[0]: GPU VA; payload[1]: status | vmhub << 32 */
#define RVGL_EVENT_SPM_DATA_LOSS 4u /* queue: xcp; payload[0]: slices that lost data */
#define RVGL_EVENT_QUEUE_HANG 5u    /* payload[0]: seq of the job past its timeout */

#define RVGL_EVENT_RESET_GUILTY (1ull << 0)
#define RVGL_EVENT_RESET_INNOCENT (1ull << 1)
#define RVGL_EVENT_RESET_VRAM_LOST (1ull << 2)

#define RVGL_EVENT_QUEUE_NONE 0xffffffffu

struct rvgl_event {
  uint32_t seq;   /* 1-based record number: event_wptr just after this record was written */
  uint32_t type;  /* RVGL_EVENT_* */
  uint32_t queue; /* queue handle the event concerns, or RVGL_EVENT_QUEUE_NONE */
  uint32_t pad;
  uint64_t payload[2];
};
RVGL_CHECK_SIZE(struct rvgl_event, 32);
RVGL_STATIC_ASSERT(RVGL_EVENT_RING_OFFSET + RVGL_EVENT_RING_ENTRIES * 32u <= RVGL_RSP_AREA_OFFSET,
                   "event ring fits before the response area");

/* ------------------------------------------------------------------------------------------ */
/* Framing                                                                                    */
/* ------------------------------------------------------------------------------------------ */

#define RVGL_ALIGNMENT 8u
/* rsp_off value for a request that wants no response written. */
#define RVGL_RSP_NONE 0xffffffffu

struct rvgl_req_hdr {
  uint32_t cmd;     /* RVGL_CMD_* */
  uint32_t len;     /* bytes of this request including the header; multiple of 8 */
  uint32_t seqno;   /* guest-chosen, increasing (see PROTOCOL.md) */
  uint32_t rsp_off; /* byte offset in the response area, multiple of 8, or RVGL_RSP_NONE */
};
RVGL_CHECK_SIZE(struct rvgl_req_hdr, 16);

struct rvgl_rsp_hdr {
  int32_t result; /* 0 or a negative errno */
  uint32_t seqno; /* the request's seqno, stored last: the response is complete when it matches */
};
RVGL_CHECK_SIZE(struct rvgl_rsp_hdr, 8);

/* ------------------------------------------------------------------------------------------ */
/* Commands                                                                                   */
/* ------------------------------------------------------------------------------------------ */

enum rvgl_cmd {
  RVGL_CMD_NOP = 1,
  RVGL_CMD_QUERY_INFO = 2,
  RVGL_CMD_BO_CREATE = 3,
  RVGL_CMD_BO_FREE = 4,
  RVGL_CMD_VA_MAP = 5,
  RVGL_CMD_VA_UNMAP = 6,
  RVGL_CMD_QUEUE_CREATE = 7,
  RVGL_CMD_QUEUE_DESTROY = 8,
  RVGL_CMD_SUBMIT = 9,
  RVGL_CMD_QUEUE_STATE = 10,
  RVGL_CMD_SPM_ACQUIRE = 11,
  RVGL_CMD_SPM_RELEASE = 12,
  RVGL_CMD_SPM_SET_DEST = 13,
  RVGL_CMD_COUNT /* one past the last command of this version */
};

/* ---- NOP: does nothing; the response says the host processed the stream up to here. ---- */
struct rvgl_req_nop {
  struct rvgl_req_hdr hdr;
};
struct rvgl_rsp_nop {
  struct rvgl_rsp_hdr hdr;
};
RVGL_CHECK_SIZE(struct rvgl_req_nop, 16);
RVGL_CHECK_SIZE(struct rvgl_rsp_nop, 8);

/* ---- QUERY_INFO: dynamic facts not in the capset. ---- */
#define RVGL_INFO_MEMORY 1u    /* struct rvgl_info_memory */
#define RVGL_INFO_USAGE 2u     /* struct rvgl_info_usage */
#define RVGL_INFO_TIMESTAMP 3u /* struct rvgl_info_timestamp */

struct rvgl_info_memory { /* device-wide heaps, bytes */
  uint64_t vram_total;
  uint64_t vram_used;
  uint64_t visible_vram_total;
  uint64_t visible_vram_used;
  uint64_t gtt_total;
  uint64_t gtt_used;
};
RVGL_CHECK_SIZE(struct rvgl_info_memory, 48);

struct rvgl_info_usage { /* this context: what it holds and what it may hold */
  uint64_t objects;
  uint64_t vram_bytes;
  uint64_t gtt_bytes;
  uint64_t userptr_bytes;
  uint64_t queues;
  uint64_t max_objects;
  uint64_t max_vram_bytes;
  uint64_t max_gtt_bytes;
  uint64_t max_userptr_bytes;
  uint64_t max_queues;
};
RVGL_CHECK_SIZE(struct rvgl_info_usage, 80);

struct rvgl_info_timestamp {
  uint64_t gpu_timestamp; /* ticks of gpu_counter_freq_khz */
};
RVGL_CHECK_SIZE(struct rvgl_info_timestamp, 8);

#define RVGL_INFO_DATA_SIZE 112u

struct rvgl_req_query_info {
  struct rvgl_req_hdr hdr;
  uint32_t query; /* RVGL_INFO_* */
  uint32_t pad;
};
struct rvgl_rsp_query_info {
  struct rvgl_rsp_hdr hdr;
  uint32_t query; /* echoes the request */
  uint32_t size;  /* bytes of data that are valid */
  union {
    struct rvgl_info_memory memory;
    struct rvgl_info_usage usage;
    struct rvgl_info_timestamp timestamp;
    uint8_t raw[RVGL_INFO_DATA_SIZE];
  } data;
};
RVGL_CHECK_SIZE(struct rvgl_req_query_info, 24);
RVGL_CHECK_SIZE(struct rvgl_rsp_query_info, 128);
RVGL_CHECK_OFFSET(struct rvgl_rsp_query_info, data, 16);

/* ---- BO_CREATE: a host memory object, optionally parked under a blob_id. ---- */
#define RVGL_DOMAIN_VRAM 1u
#define RVGL_DOMAIN_GTT 2u
#define RVGL_DOMAIN_DOORBELL 4u

#define RVGL_BO_FLAG_CPU_ACCESS (1u << 0)    /* VRAM: must be CPU-mappable (for a MAPPABLE blob) */
#define RVGL_BO_FLAG_NO_CPU_ACCESS (1u << 1) /* VRAM: never CPU-mapped */
#define RVGL_BO_FLAG_WRITE_COMBINE (1u << 2) /* GTT: write-combined CPU mapping */
#define RVGL_BO_FLAGS_ALL \
  (RVGL_BO_FLAG_CPU_ACCESS | RVGL_BO_FLAG_NO_CPU_ACCESS | RVGL_BO_FLAG_WRITE_COMBINE)

struct rvgl_req_bo_create {
  struct rvgl_req_hdr hdr;
  uint64_t size;      /* bytes, > 0, multiple of 4096 */
  uint64_t alignment; /* 0 or a power of two <= 2 MiB */
  uint32_t domain;    /* exactly one RVGL_DOMAIN_* */
  uint32_t flags;     /* RVGL_BO_FLAG_* */
  uint64_t blob_id;   /* 0: no blob; else claimed once by RESOURCE_CREATE_BLOB(HOST3D, blob_id) */
};
struct rvgl_rsp_bo_create {
  struct rvgl_rsp_hdr hdr;
  uint32_t bo; /* handle, >= 1 */
  uint32_t pad;
};
RVGL_CHECK_SIZE(struct rvgl_req_bo_create, 48);
RVGL_CHECK_OFFSET(struct rvgl_req_bo_create, blob_id, 40);
RVGL_CHECK_SIZE(struct rvgl_rsp_bo_create, 16);

/* ---- BO_FREE ---- */
struct rvgl_req_bo_free {
  struct rvgl_req_hdr hdr;
  uint32_t bo;
  uint32_t pad;
};
struct rvgl_rsp_bo_free {
  struct rvgl_rsp_hdr hdr;
};
RVGL_CHECK_SIZE(struct rvgl_req_bo_free, 24);
RVGL_CHECK_SIZE(struct rvgl_rsp_bo_free, 8);

/* ---- VA_MAP / VA_UNMAP: the guest's own part of the GPU VA space. ---- */
#define RVGL_VA_FLAG_READ (1u << 0)
#define RVGL_VA_FLAG_WRITE (1u << 1)
#define RVGL_VA_FLAG_EXECUTE (1u << 2)
#define RVGL_VA_FLAGS_ALL (RVGL_VA_FLAG_READ | RVGL_VA_FLAG_WRITE | RVGL_VA_FLAG_EXECUTE)

/* An object is named by exactly one of: bo (a BO_CREATE handle) or res_id (a resource attached to
 * this context: a userptr blob, a claimed BO blob, or an imported resource). */
struct rvgl_req_va_map {
  struct rvgl_req_hdr hdr;
  uint32_t bo;
  uint32_t res_id;
  uint64_t offset; /* into the object */
  uint64_t va;
  uint64_t size;
  uint32_t flags; /* RVGL_VA_FLAG_*, at least READ */
  uint32_t pad;
};
struct rvgl_rsp_va_map {
  struct rvgl_rsp_hdr hdr;
};
RVGL_CHECK_SIZE(struct rvgl_req_va_map, 56);
RVGL_CHECK_OFFSET(struct rvgl_req_va_map, offset, 24);
RVGL_CHECK_OFFSET(struct rvgl_req_va_map, flags, 48);

struct rvgl_req_va_unmap {
  struct rvgl_req_hdr hdr;
  uint64_t va;   /* start of an existing mapping */
  uint64_t size; /* its size */
};
struct rvgl_rsp_va_unmap {
  struct rvgl_rsp_hdr hdr;
};
RVGL_CHECK_SIZE(struct rvgl_req_va_unmap, 32);

/* ---- QUEUE_CREATE / QUEUE_DESTROY ---- */
#define RVGL_QUEUE_KIND_KERNEL 1u
#define RVGL_QUEUE_KIND_USER 2u

#define RVGL_PRIORITY_NORMAL 0u
#define RVGL_PRIORITY_LOW 1u
#define RVGL_PRIORITY_HIGH 2u

struct rvgl_req_queue_create {
  struct rvgl_req_hdr hdr;
  uint32_t kind;     /* RVGL_QUEUE_KIND_* */
  uint32_t ip;       /* RVGL_IP_COMPUTE or RVGL_IP_SDMA */
  uint32_t priority; /* RVGL_PRIORITY_* */
  uint32_t ring_idx; /* RVGL_RING_FIRST_QUEUE..RVGL_RING_LAST_QUEUE, one queue per ring */
  /* RVGL_QUEUE_KIND_USER only (zero for kernel queues); the user-queue contract is PROTOCOL.md
   * section 6, QUEUE_CREATE. Each range lies inside one VA_MAP mapping. */
  uint64_t queue_va;        /* RVGL_USERQ_RING_ALIGNMENT aligned */
  uint64_t queue_size;      /* bytes, power of two, RVGL_USERQ_MIN/MAX_RING_SIZE */
  uint64_t rptr_va;         /* 8-byte aligned, RVGL_USERQ_PTR_SPAN bytes mapped from it */
  uint64_t wptr_va;         /* 8-byte aligned, start of a mapping of an object <= 4096 bytes */
  uint64_t eop_va;          /* compute: EOP buffer; SDMA: context save area (see capset) */
  uint32_t doorbell_bo;     /* handle of a RVGL_DOMAIN_DOORBELL object */
  uint32_t doorbell_offset; /* index of an 8-byte doorbell in it: byte offset = 8 * index */
};

/* User queues (PROTOCOL.md, QUEUE_CREATE). */
#define RVGL_USERQ_RING_ALIGNMENT 256u   /* queue_va: the ring base register drops bits 0-7 */
#define RVGL_USERQ_MIN_RING_SIZE 4096u   /* queue_size: one GPU page at least */
/* queue_size at most: the kernel keeps it in a u32 (amdgpu.h, struct amdgpu_mqd_prop) */
#define RVGL_USERQ_MAX_RING_SIZE 0x80000000ull
#define RVGL_USERQ_PTR_SPAN 4096u        /* bytes from rptr_va / wptr_va that must be mapped */
#define RVGL_USERQ_WPTR_OBJECT_MAX 4096u /* the object behind wptr_va: at most one page */
#define RVGL_USERQ_DOORBELL_SIZE 8u      /* bytes per doorbell; doorbell_offset counts these */
struct rvgl_rsp_queue_create {
  struct rvgl_rsp_hdr hdr;
  uint32_t queue; /* handle, >= 1 */
  uint32_t pad;
};
RVGL_CHECK_SIZE(struct rvgl_req_queue_create, 80);
RVGL_CHECK_OFFSET(struct rvgl_req_queue_create, queue_va, 32);
RVGL_CHECK_OFFSET(struct rvgl_req_queue_create, doorbell_bo, 72);
RVGL_CHECK_SIZE(struct rvgl_rsp_queue_create, 16);

struct rvgl_req_queue_destroy {
  struct rvgl_req_hdr hdr;
  uint32_t queue;
  uint32_t pad;
};
struct rvgl_rsp_queue_destroy {
  struct rvgl_rsp_hdr hdr;
};
RVGL_CHECK_SIZE(struct rvgl_req_queue_destroy, 24);

/* ---- SUBMIT: IBs on a kernel queue, after waits on other queues of this context. ---- */
struct rvgl_ib {
  uint64_t va;    /* GPU VA of the IB, 4-byte aligned */
  uint32_t size;  /* bytes, > 0, multiple of 4 */
  uint32_t flags; /* must be 0 in v1 */
};
RVGL_CHECK_SIZE(struct rvgl_ib, 16);

struct rvgl_wait {
  uint32_t queue; /* a queue handle of this context */
  uint32_t pad;
  uint64_t seq; /* a seq returned by a SUBMIT on that queue */
};
RVGL_CHECK_SIZE(struct rvgl_wait, 16);

struct rvgl_req_submit {
  struct rvgl_req_hdr hdr;
  uint32_t queue;
  uint32_t flags;     /* must be 0 in v1 */
  uint32_t num_ibs;   /* 1..capset.max_ibs_per_submit */
  uint32_t num_waits; /* 0..capset.max_waits_per_submit */
  /* followed by: struct rvgl_ib ibs[num_ibs]; struct rvgl_wait waits[num_waits]; */
};
struct rvgl_rsp_submit {
  struct rvgl_rsp_hdr hdr;
  uint64_t seq; /* per-queue sequence number of this submission, starting at 1 */
};
RVGL_CHECK_SIZE(struct rvgl_req_submit, 32);
RVGL_CHECK_SIZE(struct rvgl_rsp_submit, 16);

/* ---- QUEUE_STATE ---- */
#define RVGL_QUEUE_STATE_OK 0u
#define RVGL_QUEUE_STATE_LOST 1u /* reset, faulted or hung: destroy and recreate */

#define RVGL_QUEUE_FLAG_GUILTY (1u << 0)
#define RVGL_QUEUE_FLAG_INNOCENT (1u << 1)
#define RVGL_QUEUE_FLAG_VRAM_LOST (1u << 2)
#define RVGL_QUEUE_FLAG_VM_FAULT (1u << 3)
#define RVGL_QUEUE_FLAG_HANG (1u << 4)

struct rvgl_req_queue_state {
  struct rvgl_req_hdr hdr;
  uint32_t queue;
  uint32_t pad;
};
struct rvgl_rsp_queue_state {
  struct rvgl_rsp_hdr hdr;
  uint32_t state; /* RVGL_QUEUE_STATE_* */
  uint32_t flags; /* RVGL_QUEUE_FLAG_* */
  uint64_t last_submitted_seq;
  uint64_t last_completed_seq;
  int32_t error; /* first job error seen, negative errno, or 0 */
  uint32_t pad;
};
RVGL_CHECK_SIZE(struct rvgl_req_queue_state, 24);
RVGL_CHECK_SIZE(struct rvgl_rsp_queue_state, 40);

/* ---- SPM (stream performance monitor) ---- */
struct rvgl_req_spm_acquire {
  struct rvgl_req_hdr hdr;
  uint32_t xcp;      /* < capset.num_xcp */
  uint32_t ring_idx; /* ring whose fences retire as SPM_SET_DEST requests complete */
};
struct rvgl_rsp_spm_acquire {
  struct rvgl_rsp_hdr hdr;
};
RVGL_CHECK_SIZE(struct rvgl_req_spm_acquire, 24);

struct rvgl_req_spm_release {
  struct rvgl_req_hdr hdr;
  uint32_t xcp;
  uint32_t pad;
};
struct rvgl_rsp_spm_release {
  struct rvgl_rsp_hdr hdr;
};
RVGL_CHECK_SIZE(struct rvgl_req_spm_release, 24);

/* Destination: [offset, offset + size) of an object named like VA_MAP does (bo xor res_id).
 * size 0 stops streaming. The response is written when the kernel call returns. */
struct rvgl_req_spm_set_dest {
  struct rvgl_req_hdr hdr;
  uint32_t xcp;
  uint32_t bo;
  uint32_t res_id;
  uint32_t timeout_ms;
  uint64_t offset;
  uint64_t size; /* <= 4 GiB - 1 (the kernel's buf_size is 32-bit) */
};
struct rvgl_rsp_spm_set_dest {
  struct rvgl_rsp_hdr hdr;
  uint32_t bytes_copied;  /* into the previous destination */
  uint32_t has_data_loss; /* slices of the previous destination that lost data */
  uint32_t timeout_left_ms;
  uint32_t pad;
};
RVGL_CHECK_SIZE(struct rvgl_req_spm_set_dest, 48);
RVGL_CHECK_SIZE(struct rvgl_rsp_spm_set_dest, 24);

/* SPM destination layout: one slice per XCC, each starting with this header (the kernel's). */
struct rvgl_spm_buffer_header {
  uint32_t version; /* 0-23 minor, 24-31 major */
  uint32_t bytes_copied;
  uint32_t has_data_loss;
  uint32_t reserved[5];
};
RVGL_CHECK_SIZE(struct rvgl_spm_buffer_header, 32);

/* The largest response of this version: hosts size their shadow buffer with it. */
#define RVGL_MAX_RSP_SIZE 128u

#ifdef __cplusplus
}
#endif

#endif /* ROCM_VIRGL_PROTOCOL_H */
