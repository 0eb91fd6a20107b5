// The vtest protocol, version 3, as virglrenderer 0.10.4 speaks it. Values come from
// vtest/vtest_protocol.h; behaviour notes from vtest/vtest_server.c and vtest/vtest_renderer.c
// (read at tag 0.10.4). Private to the guest library and its tests: not installed.
#pragma once

#include <cstdint>

namespace rvgl::guest::vtest {

// vtest_protocol.h: VTEST_PROTOCOL_VERSION is 3 when built with VIRGL_RENDERER_UNSTABLE_APIS,
// which is what gives the blob, sync and SUBMIT_CMD2 commands used here.
inline constexpr uint32_t kProtocolVersion = 3;

// vtest_protocol.h: VTEST_HDR_SIZE 2, VTEST_CMD_LEN 0, VTEST_CMD_ID 1. Every message, in both
// directions, is [length, command id] then the body. The length counts dwords of the body, except
// for CREATE_RENDERER, whose length is in bytes (vtest_server.c passes header[0] to
// vtest_create_context, which reads that many bytes of name).
inline constexpr uint32_t kHeaderDwords = 2;
inline constexpr uint32_t kHeaderLen = 0;
inline constexpr uint32_t kHeaderCmd = 1;

// vtest_protocol.h: command ids.
inline constexpr uint32_t kCmdResourceUnref = 3;         // VCMD_RESOURCE_UNREF
inline constexpr uint32_t kCmdCreateRenderer = 8;        // VCMD_CREATE_RENDERER
inline constexpr uint32_t kCmdPingProtocolVersion = 10;  // VCMD_PING_PROTOCOL_VERSION
inline constexpr uint32_t kCmdProtocolVersion = 11;      // VCMD_PROTOCOL_VERSION
inline constexpr uint32_t kCmdGetParam = 15;             // VCMD_GET_PARAM
inline constexpr uint32_t kCmdGetCapset = 16;            // VCMD_GET_CAPSET
inline constexpr uint32_t kCmdContextInit = 17;          // VCMD_CONTEXT_INIT
inline constexpr uint32_t kCmdResourceCreateBlob = 18;   // VCMD_RESOURCE_CREATE_BLOB
inline constexpr uint32_t kCmdSyncCreate = 19;           // VCMD_SYNC_CREATE
inline constexpr uint32_t kCmdSyncUnref = 20;            // VCMD_SYNC_UNREF
inline constexpr uint32_t kCmdSyncRead = 21;             // VCMD_SYNC_READ
inline constexpr uint32_t kCmdSyncWrite = 22;            // VCMD_SYNC_WRITE
inline constexpr uint32_t kCmdSyncWait = 23;             // VCMD_SYNC_WAIT
inline constexpr uint32_t kCmdSubmitCmd2 = 24;           // VCMD_SUBMIT_CMD2

// vtest_protocol.h body sizes in dwords (VCMD_*_SIZE), with the reply vtest_renderer.c writes.
// PING_PROTOCOL_VERSION: empty; reply: a bare header.
inline constexpr uint32_t kPingSize = 0;
// PROTOCOL_VERSION: the version asked; reply: min(asked, server's), or 0 without memfd support.
inline constexpr uint32_t kProtocolVersionSize = 1;
// GET_PARAM: the param; reply: valid, value.
inline constexpr uint32_t kGetParamSize = 1;
// GET_CAPSET: id, version; reply: valid, then (length - 1) dwords of caps (none when invalid).
inline constexpr uint32_t kGetCapsetSize = 2;
// CONTEXT_INIT: capset id; no reply.
inline constexpr uint32_t kContextInitSize = 1;
// RESOURCE_CREATE_BLOB: type, flags, size lo/hi, blob_id lo/hi; reply: res_id, then one fd.
inline constexpr uint32_t kResCreateBlobSize = 6;
// RESOURCE_UNREF: res_id; no reply.
inline constexpr uint32_t kResUnrefSize = 1;
// SYNC_CREATE: value lo/hi; reply: sync id.
inline constexpr uint32_t kSyncCreateSize = 2;
// SYNC_UNREF: id; no reply.
inline constexpr uint32_t kSyncUnrefSize = 1;
// SYNC_READ: id; reply: value lo/hi.
inline constexpr uint32_t kSyncReadSize = 1;
// SYNC_WRITE: id, value lo/hi; no reply.
inline constexpr uint32_t kSyncWriteSize = 3;
// SYNC_WAIT (VCMD_SYNC_WAIT_SIZE(count)): flags, timeout in ms, then (id, value lo, value hi) per
// sync; reply: a bare header, then one fd (an eventfd) that becomes readable when satisfied.
inline constexpr uint32_t sync_wait_size(uint32_t count) {
  return 2 + 3 * count;
}

// vtest_protocol.h: VCMD_PARAM_MAX_TIMELINE_COUNT; vtest_renderer.c answers 64
// (VTEST_MAX_TIMELINE_COUNT), or 0 when VIRGL_DISABLE_MT is set.
inline constexpr uint32_t kParamMaxTimelineCount = 1;

// vtest_protocol.h: enum vcmd_sync_wait_flag.
inline constexpr uint32_t kSyncWaitFlagAny = 1u << 0;  // VCMD_SYNC_WAIT_FLAG_ANY

// vtest_protocol.h: VCMD_SUBMIT_CMD2: dword 0 batch count, then 8 dwords per batch (flags,
// cmd_offset, cmd_size, sync_offset, sync_count, ring_idx, two unused); offsets and sizes are in
// dwords from the start of the body; each sync is (id, value lo, value hi). No reply.
inline constexpr uint32_t kSubmitCmd2BatchDwords = 8;
inline constexpr uint32_t kSubmitCmd2FlagRingIdx = 1u << 0;  // VCMD_SUBMIT_CMD2_FLAG_RING_IDX
inline constexpr uint32_t kSyncEntryDwords = 3;
// vtest_renderer.c: ring_idx must be below VTEST_MAX_TIMELINE_COUNT (64) even without the flag.
inline constexpr uint32_t kMaxTimelines = 64;

// vtest_renderer.c vtest_create_context: names longer than 1 MiB are refused.
inline constexpr uint32_t kMaxRendererName = 1024 * 1024;

}  // namespace rvgl::guest::vtest
