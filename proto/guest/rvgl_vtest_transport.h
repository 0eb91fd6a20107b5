// The guest transport over virglrenderer's vtest socket, protocol version 3 (virglrenderer 0.10.4
// and later): no VM needed, the "guest" is any process that can reach the server's UNIX socket.
//
// Fences are vtest syncs: each ring gets a timeline sync, every fenced submit signals the next
// point on it (SUBMIT_CMD2 with the ring index flag), and waiting is SYNC_WAIT's eventfd.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rvgl_transport.h"

namespace rvgl::guest {

namespace vtest {
class Socket;
}

struct VtestOptions {
  std::string client_name = "rocm-virgl-guest";    // CREATE_RENDERER: shown in the server's logs
  std::chrono::milliseconds reply_timeout{30000};  // bound on every wait for a server reply
};

// A sync point: a vtest sync id and a value on its timeline.
struct VtestSyncPoint {
  uint32_t id = 0;
  uint64_t value = 0;
};

class VtestTransport final : public Transport {
 public:
  // Connects to the server's socket and negotiates protocol version 3.
  static Result<std::unique_ptr<VtestTransport>> connect(const std::string &socket_path,
                                                         const VtestOptions &options = {});
  // The same over an already connected stream socket (a socketpair, an inherited fd).
  static Result<std::unique_ptr<VtestTransport>> adopt(UniqueFd socket,
                                                       const VtestOptions &options = {});

  ~VtestTransport() override;

  const char *name() const override { return "vtest"; }
  Result<std::vector<uint8_t>> get_capset(uint32_t capset_id, uint32_t version) override;
  Status init_context(uint32_t capset_id, uint32_t num_rings) override;
  Result<Blob> create_blob(const BlobParams &params) override;
  Status map_blob(Blob &blob) override;
  Status unref_blob(Blob &&blob) override;
  Result<Fence> submit(const SubmitParams &params) override;
  Result<bool> wait(const Fence &fence, std::chrono::milliseconds timeout) override;

  // vtest's own commands, for callers that want them directly.
  Result<uint32_t> max_timeline_count();  // GET_PARAM(MAX_TIMELINE_COUNT)
  Result<uint32_t> sync_create(uint64_t value);
  Status sync_unref(uint32_t id);
  Result<uint64_t> sync_read(uint32_t id);
  Status sync_write(uint32_t id, uint64_t value);
  // SYNC_WAIT: an eventfd that becomes readable once all points (or any, with `any`) are reached.
  // The server forgets the wait after `timeout_ms`; 0 means it only ever reports points already
  // reached, and values above INT32_MAX keep it forever.
  Result<UniqueFd> sync_wait_fd(std::span<const VtestSyncPoint> points, bool any,
                                uint32_t timeout_ms);
  // SUBMIT_CMD2 with one batch, exactly as given.
  Status submit_cmd2(std::span<const uint8_t> commands, std::span<const VtestSyncPoint> signals,
                     std::optional<uint32_t> ring_idx);

  uint32_t protocol_version() const { return protocol_version_; }
  bool connection_failed() const;

 private:
  explicit VtestTransport(std::unique_ptr<vtest::Socket> sock);
  Status handshake(const std::string &client_name);
  Status send_dwords(uint32_t cmd, std::span<const uint32_t> body);
  Result<VtestSyncPoint> next_timeline_point(uint32_t timeline);

  struct Timeline {
    uint32_t sync_id = 0;
    uint64_t last = 0;
  };

  std::unique_ptr<vtest::Socket> sock_;  // the wire details stay out of the installed headers
  uint32_t protocol_version_ = 0;
  bool context_ready_ = false;
  std::vector<uint32_t> spare_syncs_;       // created but not yet given a timeline
  std::map<uint32_t, Timeline> timelines_;  // by ring index; kNoRing for unringed submits
};

}  // namespace rvgl::guest
