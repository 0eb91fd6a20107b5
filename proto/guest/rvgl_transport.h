// What a guest needs from the channel to the host, whatever carries it: the vtest socket today,
// virtio-gpu's DRM ioctls inside a VM. The session above it speaks only in these terms.
//
// Transports are not thread-safe: one thread at a time, like the session that owns one.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "rocm_virgl_protocol.h"
#include "rvgl_mapping.h"
#include "rvgl_result.h"
#include "rvgl_unique_fd.h"

namespace rvgl::guest {

inline constexpr std::chrono::milliseconds kWaitForever = std::chrono::milliseconds::max();

struct BlobParams {
  uint32_t blob_mem = RVGL_BLOB_MEM_HOST3D;           // RVGL_BLOB_MEM_*
  uint32_t blob_flags = RVGL_BLOB_FLAG_USE_MAPPABLE;  // RVGL_BLOB_FLAG_*
  uint64_t blob_id = 0;
  uint64_t size = 0;
  // GUEST / HOST3D_GUEST blobs: the guest memory to share, at most `size` bytes. A transport that
  // can hand the host the guest's own pages (virtio-gpu userptr) shares them in place and they
  // must stay valid while the resource lives. vtest cannot: the server makes the memory itself,
  // so these bytes are copied in once and Blob::memory is where the guest and host meet.
  std::span<uint8_t> guest_memory;
};

// A resource the host created, and what the transport got back for it. Move-only: it owns the
// fd and the mapping. Dropping it does not drop the host resource: Transport::unref_blob does.
struct Blob {
  uint32_t res_id = 0;
  uint32_t handle = 0;  // transport's own handle (virtio-gpu GEM handle), 0 when none
  uint32_t blob_mem = 0;
  uint32_t blob_flags = 0;
  uint64_t size = 0;
  UniqueFd fd;      // the host's fd for the memory (vtest), when there is one
  Mapping mapping;  // owned CPU mapping, when the transport made one
  // Where the guest reads and writes the blob's memory: the mapping, or the guest's own pages
  // for in-place userptr blobs; empty until Transport::map_blob for HOST3D blobs.
  std::span<uint8_t> memory;
};

// A point the host signals when a submission has retired on its ring. Opaque to callers.
struct Fence {
  uint64_t id = 0;     // vtest: sync id
  uint64_t value = 0;  // vtest: timeline point on that sync
  UniqueFd fd;         // virtio-gpu: the out-fence sync_file
  bool valid() const { return id != 0 || fd.valid(); }
};

struct SubmitParams {
  std::span<const uint8_t> commands;  // a whole number of dwords
  // With a ring index, the fence retires on that ring (RVGL_RING_*); without, when the host has
  // taken the buffer.
  std::optional<uint32_t> ring_idx;
  bool want_fence = true;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual const char *name() const = 0;

  // The capset's bytes, or -ENOENT when the host does not offer that id at that version.
  virtual Result<std::vector<uint8_t>> get_capset(uint32_t capset_id, uint32_t version) = 0;

  // Creates the context for `capset_id` with `num_rings` fence rings. Fails if the host has no
  // context type for the capset.
  virtual Status init_context(uint32_t capset_id, uint32_t num_rings) = 0;

  virtual Result<Blob> create_blob(const BlobParams &params) = 0;
  // Maps a blob created MAPPABLE into Blob::mapping / Blob::memory.
  virtual Status map_blob(Blob &blob) = 0;
  virtual Status unref_blob(Blob &&blob) = 0;

  // Hands a command buffer to the context. Returns the fence when one was asked for, else an
  // invalid Fence.
  virtual Result<Fence> submit(const SubmitParams &params) = 0;

  // true when the fence has signalled, false when `timeout` passed first.
  virtual Result<bool> wait(const Fence &fence, std::chrono::milliseconds timeout) = 0;
};

}  // namespace rvgl::guest
