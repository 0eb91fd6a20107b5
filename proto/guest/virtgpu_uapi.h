// The virtio-gpu DRM uAPI the virtio-gpu transport speaks, defined in one place and checked.
//
// Debian's libdrm 2.4.114 ships an old virtgpu_drm.h: MAP, a 32-byte EXECBUFFER without ring
// indices, GETPARAM (3D_FEATURES, CAPSET_QUERY_FIX), WAIT and GET_CAPS. Those come from it. What
// it lacks is mirrored here from the kernel's include/uapi/drm/virtgpu_drm.h (torvalds/linux, read
// at commit 908ae7e081bc): blob resources, context init with rings, EXECBUFFER's ring_idx and
// syncobj fields, and the newer GETPARAM ids. Macros keep the kernel's names, each guarded so a
// newer libdrm header that defines them too must agree (the static_asserts below). Structures are
// given project names, because libdrm's own struct drm_virtgpu_execbuffer is the short old one.
//
// The userptr extension is the virtio-gpu userptr series for the ROCm native context (seed 002;
// dri-devel "[PATCH v5 3/5] drm/virtgpu api: add blob userptr resource", Honglei Huang,
// 2026-01-16, Message-ID <20260116083808.325180-4-honglei1.huang@amd.com>). It is not upstream;
// the revisions found (2025-03, v3 of 2025-11, v5 of 2026-01) share one layout:
//   - blob flags VIRTGPU_BLOB_FLAG_USE_USERPTR 0x0008 and VIRTGPU_BLOB_FLAG_USERPTR_RDONLY 0x0010;
//   - one `__u64 userptr` appended to struct drm_virtgpu_resource_create_blob after blob_id
//     (48 -> 56 bytes): the guest user address of the pages to pin, 0 when not userptr.
// v5 patch 5/5 sends a guest blob (blob_mem GUEST or HOST3D_GUEST) with a non-zero userptr down
// the pinning path, and refuses a userptr with -EINVAL when the host lacks the feature; patch 4/5
// pins without FOLL_WRITE when USERPTR_RDONLY is set. v5 rounds an unaligned address and size out
// to whole pages, a later posted virtgpu_userptr.c refuses them: callers here must align both.
// v3 also had a GETPARAM VIRTGPU_PARAM_RESOURCE_USERPTR (9); v4 dropped it, so there is no probe:
// a kernel without the series refuses the flags (outside its VIRTGPU_BLOB_FLAG_USE_MASK), -EINVAL.
//
// Not an installed header: it pulls in libdrm's, and guests only need the transport's interface.
#pragma once

#include <libdrm/drm.h>
#include <libdrm/virtgpu_drm.h>

#include <cstddef>
#include <cstdint>

#include "rocm_virgl_protocol.h"

// ---- command numbers (DRM_COMMAND_BASE + n) ----
#ifndef DRM_VIRTGPU_RESOURCE_CREATE_BLOB
#define DRM_VIRTGPU_RESOURCE_CREATE_BLOB 0x0a
#endif
#ifndef DRM_VIRTGPU_CONTEXT_INIT
#define DRM_VIRTGPU_CONTEXT_INIT 0x0b
#endif

// ---- EXECBUFFER flags ----
#ifndef VIRTGPU_EXECBUF_RING_IDX
#define VIRTGPU_EXECBUF_RING_IDX 0x04
#endif

// ---- GETPARAM ids (the kernel writes the answer as an int through `value`) ----
#ifndef VIRTGPU_PARAM_RESOURCE_BLOB
#define VIRTGPU_PARAM_RESOURCE_BLOB 3
#endif
#ifndef VIRTGPU_PARAM_HOST_VISIBLE
#define VIRTGPU_PARAM_HOST_VISIBLE 4
#endif
#ifndef VIRTGPU_PARAM_CROSS_DEVICE
#define VIRTGPU_PARAM_CROSS_DEVICE 5
#endif
#ifndef VIRTGPU_PARAM_CONTEXT_INIT
#define VIRTGPU_PARAM_CONTEXT_INIT 6
#endif
#ifndef VIRTGPU_PARAM_SUPPORTED_CAPSET_IDs
#define VIRTGPU_PARAM_SUPPORTED_CAPSET_IDs 7
#endif

// ---- blob resources ----
#ifndef VIRTGPU_BLOB_MEM_GUEST
#define VIRTGPU_BLOB_MEM_GUEST 0x0001
#endif
#ifndef VIRTGPU_BLOB_MEM_HOST3D
#define VIRTGPU_BLOB_MEM_HOST3D 0x0002
#endif
#ifndef VIRTGPU_BLOB_MEM_HOST3D_GUEST
#define VIRTGPU_BLOB_MEM_HOST3D_GUEST 0x0003
#endif
#ifndef VIRTGPU_BLOB_FLAG_USE_MAPPABLE
#define VIRTGPU_BLOB_FLAG_USE_MAPPABLE 0x0001
#endif
#ifndef VIRTGPU_BLOB_FLAG_USE_SHAREABLE
#define VIRTGPU_BLOB_FLAG_USE_SHAREABLE 0x0002
#endif
#ifndef VIRTGPU_BLOB_FLAG_USE_CROSS_DEVICE
#define VIRTGPU_BLOB_FLAG_USE_CROSS_DEVICE 0x0004
#endif
// Seed 002 (see above).
#ifndef VIRTGPU_BLOB_FLAG_USE_USERPTR
#define VIRTGPU_BLOB_FLAG_USE_USERPTR 0x0008
#endif
#ifndef VIRTGPU_BLOB_FLAG_USERPTR_RDONLY
#define VIRTGPU_BLOB_FLAG_USERPTR_RDONLY 0x0010
#endif

// ---- context init ----
#ifndef VIRTGPU_CONTEXT_PARAM_CAPSET_ID
#define VIRTGPU_CONTEXT_PARAM_CAPSET_ID 0x0001
#endif
#ifndef VIRTGPU_CONTEXT_PARAM_NUM_RINGS
#define VIRTGPU_CONTEXT_PARAM_NUM_RINGS 0x0002
#endif
#ifndef VIRTGPU_CONTEXT_PARAM_POLL_RINGS_MASK
#define VIRTGPU_CONTEXT_PARAM_POLL_RINGS_MASK 0x0003
#endif
// The DRM event read(2) from the device fd when a fence on a ring in POLL_RINGS_MASK signals;
// no payload after struct drm_event.
#ifndef VIRTGPU_EVENT_FENCE_SIGNALED
#define VIRTGPU_EVENT_FENCE_SIGNALED 0x90000000
#endif

// NUM_RINGS above this is -EINVAL (MAX_RINGS in the kernel's drivers/gpu/drm/virtio/virtgpu_drv.h).
#define RVGL_VIRTGPU_MAX_RINGS 64u

// struct drm_virtgpu_execbuffer as the kernel has it now (64 bytes). drm_ioctl() zero-extends a
// shorter argument and ignores what an older kernel does not know, so one layout serves all.
struct rvgl_virtgpu_execbuffer {
  uint32_t flags;  // VIRTGPU_EXECBUF_*
  uint32_t size;   // bytes at `command`
  uint64_t command;
  uint64_t bo_handles;  // uint32_t GEM handles the submission uses (implicit fencing)
  uint32_t num_bo_handles;
  int32_t fence_fd;   // out: the sync_file with VIRTGPU_EXECBUF_FENCE_FD_OUT
  uint32_t ring_idx;  // with VIRTGPU_EXECBUF_RING_IDX
  uint32_t syncobj_stride;
  uint32_t num_in_syncobjs;
  uint32_t num_out_syncobjs;
  uint64_t in_syncobjs;
  uint64_t out_syncobjs;
};

// struct drm_virtgpu_resource_create_blob, upstream (48 bytes).
struct rvgl_virtgpu_resource_create_blob {
  uint32_t blob_mem;    // VIRTGPU_BLOB_MEM_*, 0 is invalid
  uint32_t blob_flags;  // VIRTGPU_BLOB_FLAG_*
  uint32_t bo_handle;   // out: GEM handle
  uint32_t res_handle;  // out: virtio-gpu resource id
  uint64_t size;
  uint32_t pad;
  uint32_t cmd_size;  // HOST3D / HOST3D_GUEST: a command buffer run before the blob is made
  uint64_t cmd;
  uint64_t blob_id;  // HOST3D / HOST3D_GUEST; must be 0 for GUEST
};

// The same with seed 002's userptr field (56 bytes). Sent only for userptr blobs, so that every
// other blob is exactly the upstream ioctl.
struct rvgl_virtgpu_resource_create_blob_userptr {
  rvgl_virtgpu_resource_create_blob base;
  uint64_t userptr;  // guest user address to pin; page aligned, `base.size` bytes
};

struct rvgl_virtgpu_context_set_param {
  uint64_t param;  // VIRTGPU_CONTEXT_PARAM_*
  uint64_t value;
};

struct rvgl_virtgpu_context_init {
  uint32_t num_params;
  uint32_t pad;
  uint64_t ctx_set_params;  // struct rvgl_virtgpu_context_set_param[num_params]
};

#define RVGL_IOCTL_VIRTGPU_EXECBUFFER \
  DRM_IOWR(DRM_COMMAND_BASE + DRM_VIRTGPU_EXECBUFFER, struct rvgl_virtgpu_execbuffer)
#define RVGL_IOCTL_VIRTGPU_RESOURCE_CREATE_BLOB                 \
  DRM_IOWR(DRM_COMMAND_BASE + DRM_VIRTGPU_RESOURCE_CREATE_BLOB, \
           struct rvgl_virtgpu_resource_create_blob)
#define RVGL_IOCTL_VIRTGPU_RESOURCE_CREATE_BLOB_USERPTR         \
  DRM_IOWR(DRM_COMMAND_BASE + DRM_VIRTGPU_RESOURCE_CREATE_BLOB, \
           struct rvgl_virtgpu_resource_create_blob_userptr)
#define RVGL_IOCTL_VIRTGPU_CONTEXT_INIT \
  DRM_IOWR(DRM_COMMAND_BASE + DRM_VIRTGPU_CONTEXT_INIT, struct rvgl_virtgpu_context_init)

// ---- checks: numbers against the kernel header, layouts against the kernel's structures ----

static_assert(DRM_COMMAND_BASE == 0x40);
static_assert(DRM_VIRTGPU_MAP == 0x01 && DRM_VIRTGPU_EXECBUFFER == 0x02 &&
              DRM_VIRTGPU_GETPARAM == 0x03 && DRM_VIRTGPU_WAIT == 0x08 &&
              DRM_VIRTGPU_GET_CAPS == 0x09);
static_assert(DRM_VIRTGPU_RESOURCE_CREATE_BLOB == 0x0a && DRM_VIRTGPU_CONTEXT_INIT == 0x0b);
static_assert(VIRTGPU_EXECBUF_FENCE_FD_IN == 0x01 && VIRTGPU_EXECBUF_FENCE_FD_OUT == 0x02 &&
              VIRTGPU_EXECBUF_RING_IDX == 0x04);
static_assert(VIRTGPU_PARAM_3D_FEATURES == 1 && VIRTGPU_PARAM_CAPSET_QUERY_FIX == 2 &&
              VIRTGPU_PARAM_RESOURCE_BLOB == 3 && VIRTGPU_PARAM_HOST_VISIBLE == 4 &&
              VIRTGPU_PARAM_CROSS_DEVICE == 5 && VIRTGPU_PARAM_CONTEXT_INIT == 6 &&
              VIRTGPU_PARAM_SUPPORTED_CAPSET_IDs == 7);
static_assert(VIRTGPU_CONTEXT_PARAM_CAPSET_ID == 1 && VIRTGPU_CONTEXT_PARAM_NUM_RINGS == 2 &&
              VIRTGPU_CONTEXT_PARAM_POLL_RINGS_MASK == 3);
static_assert(VIRTGPU_WAIT_NOWAIT == 1);
static_assert(VIRTGPU_EVENT_FENCE_SIGNALED == 0x90000000u);

// The protocol header's blob constants are the kernel's, so the transport passes them through.
static_assert(RVGL_BLOB_MEM_GUEST == VIRTGPU_BLOB_MEM_GUEST &&
              RVGL_BLOB_MEM_HOST3D == VIRTGPU_BLOB_MEM_HOST3D &&
              RVGL_BLOB_MEM_HOST3D_GUEST == VIRTGPU_BLOB_MEM_HOST3D_GUEST);
static_assert(RVGL_BLOB_FLAG_USE_MAPPABLE == VIRTGPU_BLOB_FLAG_USE_MAPPABLE &&
              RVGL_BLOB_FLAG_USE_SHAREABLE == VIRTGPU_BLOB_FLAG_USE_SHAREABLE &&
              RVGL_BLOB_FLAG_USE_CROSS_DEVICE == VIRTGPU_BLOB_FLAG_USE_CROSS_DEVICE &&
              RVGL_BLOB_FLAG_USERPTR == VIRTGPU_BLOB_FLAG_USE_USERPTR &&
              RVGL_BLOB_FLAG_USERPTR_RDONLY == VIRTGPU_BLOB_FLAG_USERPTR_RDONLY);
static_assert(RVGL_RING_COUNT <= RVGL_VIRTGPU_MAX_RINGS);

// libdrm's structures this transport uses as they are.
static_assert(sizeof(drm_virtgpu_map) == 16 && offsetof(drm_virtgpu_map, handle) == 8);
static_assert(sizeof(drm_virtgpu_getparam) == 16 && offsetof(drm_virtgpu_getparam, value) == 8);
static_assert(sizeof(drm_virtgpu_3d_wait) == 8 && offsetof(drm_virtgpu_3d_wait, flags) == 4);
static_assert(sizeof(drm_virtgpu_get_caps) == 24 && offsetof(drm_virtgpu_get_caps, addr) == 8 &&
              offsetof(drm_virtgpu_get_caps, size) == 16);
static_assert(sizeof(drm_gem_close) == 8);
static_assert(sizeof(drm_event) == 8 && offsetof(drm_event, length) == 4);

// Ours extend libdrm's old execbuffer in place.
static_assert(sizeof(rvgl_virtgpu_execbuffer) == 64);
static_assert(offsetof(rvgl_virtgpu_execbuffer, flags) == offsetof(drm_virtgpu_execbuffer, flags));
static_assert(offsetof(rvgl_virtgpu_execbuffer, size) == offsetof(drm_virtgpu_execbuffer, size));
static_assert(offsetof(rvgl_virtgpu_execbuffer, command) == 8 &&
              offsetof(drm_virtgpu_execbuffer, command) == 8);
static_assert(offsetof(rvgl_virtgpu_execbuffer, bo_handles) == 16 &&
              offsetof(rvgl_virtgpu_execbuffer, num_bo_handles) == 24);
static_assert(offsetof(rvgl_virtgpu_execbuffer, fence_fd) == 28 &&
              offsetof(drm_virtgpu_execbuffer, fence_fd) == 28);
static_assert(offsetof(rvgl_virtgpu_execbuffer, ring_idx) == 32 &&
              offsetof(rvgl_virtgpu_execbuffer, syncobj_stride) == 36 &&
              offsetof(rvgl_virtgpu_execbuffer, num_in_syncobjs) == 40 &&
              offsetof(rvgl_virtgpu_execbuffer, num_out_syncobjs) == 44 &&
              offsetof(rvgl_virtgpu_execbuffer, in_syncobjs) == 48 &&
              offsetof(rvgl_virtgpu_execbuffer, out_syncobjs) == 56);

static_assert(sizeof(rvgl_virtgpu_resource_create_blob) == 48);
static_assert(offsetof(rvgl_virtgpu_resource_create_blob, blob_flags) == 4 &&
              offsetof(rvgl_virtgpu_resource_create_blob, bo_handle) == 8 &&
              offsetof(rvgl_virtgpu_resource_create_blob, res_handle) == 12 &&
              offsetof(rvgl_virtgpu_resource_create_blob, size) == 16 &&
              offsetof(rvgl_virtgpu_resource_create_blob, pad) == 24 &&
              offsetof(rvgl_virtgpu_resource_create_blob, cmd_size) == 28 &&
              offsetof(rvgl_virtgpu_resource_create_blob, cmd) == 32 &&
              offsetof(rvgl_virtgpu_resource_create_blob, blob_id) == 40);
static_assert(sizeof(rvgl_virtgpu_resource_create_blob_userptr) == 56 &&
              offsetof(rvgl_virtgpu_resource_create_blob_userptr, userptr) == 48);

static_assert(sizeof(rvgl_virtgpu_context_set_param) == 16 &&
              offsetof(rvgl_virtgpu_context_set_param, value) == 8);
static_assert(sizeof(rvgl_virtgpu_context_init) == 16 &&
              offsetof(rvgl_virtgpu_context_init, ctx_set_params) == 8);

// A libdrm new enough to define these ioctls must agree with ours.
#ifdef DRM_IOCTL_VIRTGPU_RESOURCE_CREATE_BLOB
static_assert(DRM_IOCTL_VIRTGPU_RESOURCE_CREATE_BLOB == RVGL_IOCTL_VIRTGPU_RESOURCE_CREATE_BLOB);
#endif
#ifdef DRM_IOCTL_VIRTGPU_CONTEXT_INIT
static_assert(DRM_IOCTL_VIRTGPU_CONTEXT_INIT == RVGL_IOCTL_VIRTGPU_CONTEXT_INIT);
#endif
