#include "rvgl_vtest_transport.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "vtest_socket.h"
#include "vtest_wire.h"

namespace rvgl::guest {

namespace {

using namespace vtest;  // the wire constants

// Timeline key for submits without a ring index: above every valid ring index.
constexpr uint32_t kNoRing = kMaxTimelines;

// Capsets are small; a length past this is a broken or hostile server, not a capset to read.
constexpr uint32_t kMaxCapsetDwords = (1u << 20) / 4;

uint32_t lo32(uint64_t v) {
  return static_cast<uint32_t>(v);
}
uint32_t hi32(uint64_t v) {
  return static_cast<uint32_t>(v >> 32);
}

Error unexpected_length(vtest::Socket &s, const char *what, uint32_t got, uint32_t want) {
  return s.fail(-EPROTO, std::string("reply to ") + what + " has " + std::to_string(got) +
                             " dwords, expected " + std::to_string(want));
}

}  // namespace

VtestTransport::VtestTransport(std::unique_ptr<vtest::Socket> sock) : sock_(std::move(sock)) {}

VtestTransport::~VtestTransport() = default;

bool VtestTransport::connection_failed() const {
  return sock_->failed();
}

Result<std::unique_ptr<VtestTransport>> VtestTransport::connect(const std::string &socket_path,
                                                                const VtestOptions &options) {
  auto fd = vtest::Socket::connect_unix(socket_path);
  if (!fd) return fd.error();
  return adopt(std::move(*fd), options);
}

Result<std::unique_ptr<VtestTransport>> VtestTransport::adopt(UniqueFd socket,
                                                              const VtestOptions &options) {
  if (!socket) return make_error(-EBADF, "vtest: no socket");
  std::unique_ptr<VtestTransport> t(new VtestTransport(
      std::make_unique<vtest::Socket>(std::move(socket), options.reply_timeout)));
  if (auto s = t->handshake(options.client_name); !s) return s.error();
  return t;
}

Status VtestTransport::send_dwords(uint32_t cmd, std::span<const uint32_t> body) {
  std::vector<uint32_t> msg(kHeaderDwords + body.size());
  msg[kHeaderLen] = static_cast<uint32_t>(body.size());
  msg[kHeaderCmd] = cmd;
  std::copy(body.begin(), body.end(), msg.begin() + kHeaderDwords);
  return sock_->send({reinterpret_cast<const uint8_t *>(msg.data()), msg.size() * 4});
}

Status VtestTransport::handshake(const std::string &client_name) {
  // CREATE_RENDERER must come first (vtest_server.c); its length is the name's bytes with the NUL.
  if (client_name.size() + 1 > kMaxRendererName)
    return make_error(-ENAMETOOLONG, "vtest: client name too long");
  std::vector<uint8_t> msg(kHeaderDwords * 4 + client_name.size() + 1, 0);
  const uint32_t hdr[kHeaderDwords] = {static_cast<uint32_t>(client_name.size() + 1),
                                       kCmdCreateRenderer};
  std::memcpy(msg.data(), hdr, sizeof(hdr));
  std::memcpy(msg.data() + sizeof(hdr), client_name.data(), client_name.size());
  if (auto s = sock_->send(msg); !s) return s;

  // PING is answered with a bare header; it tells an old server (which would drop us on the
  // unknown PROTOCOL_VERSION) from one that can negotiate.
  if (auto s = send_dwords(kCmdPingProtocolVersion, {}); !s) return s;
  auto len = sock_->recv_header(kCmdPingProtocolVersion);
  if (!len) return len.error();
  if (*len != kPingSize) return unexpected_length(*sock_, "PING_PROTOCOL_VERSION", *len, kPingSize);

  const uint32_t want[] = {kProtocolVersion};
  if (auto s = send_dwords(kCmdProtocolVersion, want); !s) return s;
  len = sock_->recv_header(kCmdProtocolVersion);
  if (!len) return len.error();
  if (*len != kProtocolVersionSize)
    return unexpected_length(*sock_, "PROTOCOL_VERSION", *len, kProtocolVersionSize);
  uint32_t version = 0;
  if (auto s = sock_->recv_exact(&version, sizeof(version)); !s) return s;
  protocol_version_ = version;
  // The server answers min(asked, its own); it falls back to 0 without memfd support.
  if (version != kProtocolVersion)
    return sock_->fail(-EPROTONOSUPPORT, "server speaks protocol " + std::to_string(version) +
                                             ", blobs and syncs need " +
                                             std::to_string(kProtocolVersion));
  return {};
}

Result<std::vector<uint8_t>> VtestTransport::get_capset(uint32_t capset_id, uint32_t version) {
  const uint32_t body[kGetCapsetSize] = {capset_id, version};
  if (auto s = send_dwords(kCmdGetCapset, body); !s) return s.error();
  auto len = sock_->recv_header(kCmdGetCapset);
  if (!len) return len.error();
  if (*len < 1) return unexpected_length(*sock_, "GET_CAPSET", *len, 1);
  if (*len - 1 > kMaxCapsetDwords)
    return sock_->fail(-EPROTO, "GET_CAPSET reply of " + std::to_string(*len) + " dwords");
  uint32_t valid = 0;
  if (auto s = sock_->recv_exact(&valid, sizeof(valid)); !s) return s.error();
  std::vector<uint8_t> caps(size_t{*len - 1} * 4);
  if (!caps.empty())
    if (auto s = sock_->recv_exact(caps.data(), caps.size()); !s) return s.error();
  // vtest_renderer.c answers valid = 0 for an unknown id and for a version above the max.
  if (!valid)
    return make_error(-ENOENT, "vtest: the host offers no capset " + std::to_string(capset_id) +
                                   " at version " + std::to_string(version));
  return caps;
}

Status VtestTransport::init_context(uint32_t capset_id, uint32_t num_rings) {
  if (context_ready_) return make_error(-EALREADY, "vtest: context already created");
  // Refused locally: the server answers both by dropping the connection.
  if (capset_id == 0) return make_error(-EINVAL, "vtest: capset id 0");
  if (num_rings > kMaxTimelines)
    return make_error(-EINVAL, "vtest: at most " + std::to_string(kMaxTimelines) + " rings");
  const uint32_t body[kContextInitSize] = {capset_id};
  if (auto s = send_dwords(kCmdContextInit, body); !s) return s;
  // vtest ignores the error of CONTEXT_INIT (a positive errno from the renderer) and creates the
  // context lazily; the first command that needs the context then fails and the server drops
  // the client. So probe with one: a sync we keep for the first timeline.
  auto probe = sync_create(0);
  if (!probe)
    return make_error(probe.code(), "vtest: the host could not create a context for capset " +
                                        std::to_string(capset_id) + " (" + probe.error().message +
                                        ")");
  spare_syncs_.push_back(*probe);
  context_ready_ = true;
  return {};
}

Result<Blob> VtestTransport::create_blob(const BlobParams &p) {
  const bool guest = p.blob_mem == RVGL_BLOB_MEM_GUEST || p.blob_mem == RVGL_BLOB_MEM_HOST3D_GUEST;
  if (!guest && p.blob_mem != RVGL_BLOB_MEM_HOST3D)
    return make_error(-EINVAL, "vtest: unknown blob_mem " + std::to_string(p.blob_mem));
  if (p.size == 0) return make_error(-EINVAL, "vtest: blob size 0");
  if (!p.guest_memory.empty() && (!guest || p.guest_memory.size() > p.size))
    return make_error(-EINVAL, "vtest: guest memory given for a host blob or larger than it");
  if (guest && p.size > std::numeric_limits<size_t>::max())
    return make_error(-E2BIG, "vtest: blob too large to map");

  const uint32_t body[kResCreateBlobSize] = {p.blob_mem,   p.blob_flags,    lo32(p.size),
                                             hi32(p.size), lo32(p.blob_id), hi32(p.blob_id)};
  if (auto s = send_dwords(kCmdResourceCreateBlob, body); !s) return s.error();
  auto len = sock_->recv_header(kCmdResourceCreateBlob);
  if (!len) return len.error();
  if (*len != 1) return unexpected_length(*sock_, "RESOURCE_CREATE_BLOB", *len, 1);
  uint32_t res_id = 0;
  if (auto s = sock_->recv_exact(&res_id, sizeof(res_id)); !s) return s.error();
  auto fd = sock_->recv_fd();
  if (!fd) return fd.error();

  Blob b;
  b.res_id = res_id;
  b.blob_mem = p.blob_mem;
  b.blob_flags = p.blob_flags;
  b.size = p.size;
  b.fd = std::move(*fd);
  if (guest) {
    // vtest made a memfd and gave it to the host as the blob's single iovec: that memfd is the
    // guest memory now, so the guest works through a mapping of it.
    auto m = Mapping::map_shared(b.fd.get(), p.size);
    if (!m) {
      (void)unref_blob(std::move(b));
      return m.error();
    }
    if (!p.guest_memory.empty())
      std::memcpy(m->data(), p.guest_memory.data(), p.guest_memory.size());
    b.mapping = std::move(*m);
    b.memory = b.mapping.bytes();
  }
  return b;
}

Status VtestTransport::map_blob(Blob &blob) {
  if (blob.mapping.valid()) return {};
  if (!blob.fd) return make_error(-ENODEV, "vtest: blob has no fd to map");
  auto m = Mapping::map_shared(blob.fd.get(), blob.size);
  if (!m) return m.error();
  blob.mapping = std::move(*m);
  blob.memory = blob.mapping.bytes();
  return {};
}

Status VtestTransport::unref_blob(Blob &&blob) {
  Blob gone = std::move(blob);  // fd and mapping go with it, whatever the server says
  const uint32_t body[kResUnrefSize] = {gone.res_id};
  return send_dwords(kCmdResourceUnref, body);
}

Result<VtestSyncPoint> VtestTransport::next_timeline_point(uint32_t timeline) {
  auto it = timelines_.find(timeline);
  if (it == timelines_.end()) {
    Timeline t;
    if (!spare_syncs_.empty()) {
      t.sync_id = spare_syncs_.back();
      spare_syncs_.pop_back();
    } else {
      auto id = sync_create(0);
      if (!id) return id.error();
      t.sync_id = *id;
    }
    it = timelines_.emplace(timeline, t).first;
  }
  return VtestSyncPoint{it->second.sync_id, ++it->second.last};
}

Result<Fence> VtestTransport::submit(const SubmitParams &p) {
  if (p.commands.size() % 4) return make_error(-EINVAL, "vtest: command buffer not whole dwords");
  if (p.ring_idx && *p.ring_idx >= kMaxTimelines)
    return make_error(-EINVAL, "vtest: ring index " + std::to_string(*p.ring_idx) + " >= 64");
  Fence f;
  std::vector<VtestSyncPoint> signals;
  if (p.want_fence) {
    auto point = next_timeline_point(p.ring_idx ? *p.ring_idx : kNoRing);
    if (!point) return point.error();
    signals.push_back(*point);
    f.id = point->id;
    f.value = point->value;
  }
  if (auto s = submit_cmd2(p.commands, signals, p.ring_idx); !s) return s.error();
  return f;
}

Result<bool> VtestTransport::wait(const Fence &fence, std::chrono::milliseconds timeout) {
  if (!fence.valid() || fence.id > std::numeric_limits<uint32_t>::max())
    return make_error(-EINVAL, "vtest: not a vtest fence");
  using Clock = std::chrono::steady_clock;
  const bool forever = timeout == kWaitForever || timeout.count() > 0x7fffffff;
  const auto until = forever ? Clock::time_point::max() : Clock::now() + timeout;
  // Above INT32_MAX the server keeps the wait until it is satisfied (vtest_gettime).
  const uint32_t server_ms =
      forever ? 0xffffffffu : static_cast<uint32_t>(std::max<int64_t>(0, timeout.count()));
  const VtestSyncPoint point{static_cast<uint32_t>(fence.id), fence.value};
  auto fd = sync_wait_fd({&point, 1}, false, server_ms);
  if (!fd) return fd.error();
  for (;;) {
    int ms = -1;
    if (!forever) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
      ms = left < 0 ? 0 : static_cast<int>(left);
    }
    pollfd pfd{fd->get(), POLLIN, 0};
    const int r = ::poll(&pfd, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return make_error(-errno, std::string("vtest: poll: ") + std::strerror(errno));
    if (r > 0) {
      if (pfd.revents & POLLIN) return true;
      return make_error(-EIO, "vtest: the wait fd reported an error");
    }
    if (ms == 0 || Clock::now() >= until) return false;
  }
}

Result<uint32_t> VtestTransport::max_timeline_count() {
  const uint32_t body[kGetParamSize] = {kParamMaxTimelineCount};
  if (auto s = send_dwords(kCmdGetParam, body); !s) return s.error();
  auto len = sock_->recv_header(kCmdGetParam);
  if (!len) return len.error();
  if (*len != 2) return unexpected_length(*sock_, "GET_PARAM", *len, 2);
  uint32_t reply[2];
  if (auto s = sock_->recv_exact(reply, sizeof(reply)); !s) return s.error();
  if (!reply[0]) return make_error(-ENOTSUP, "vtest: server does not know MAX_TIMELINE_COUNT");
  return reply[1];
}

Result<uint32_t> VtestTransport::sync_create(uint64_t value) {
  const uint32_t body[kSyncCreateSize] = {lo32(value), hi32(value)};
  if (auto s = send_dwords(kCmdSyncCreate, body); !s) return s.error();
  auto len = sock_->recv_header(kCmdSyncCreate);
  if (!len) return len.error();
  if (*len != 1) return unexpected_length(*sock_, "SYNC_CREATE", *len, 1);
  uint32_t id = 0;
  if (auto s = sock_->recv_exact(&id, sizeof(id)); !s) return s.error();
  return id;
}

Status VtestTransport::sync_unref(uint32_t id) {
  const uint32_t body[kSyncUnrefSize] = {id};
  return send_dwords(kCmdSyncUnref, body);
}

Result<uint64_t> VtestTransport::sync_read(uint32_t id) {
  const uint32_t body[kSyncReadSize] = {id};
  if (auto s = send_dwords(kCmdSyncRead, body); !s) return s.error();
  auto len = sock_->recv_header(kCmdSyncRead);
  if (!len) return len.error();
  if (*len != 2) return unexpected_length(*sock_, "SYNC_READ", *len, 2);
  uint32_t v[2];
  if (auto s = sock_->recv_exact(v, sizeof(v)); !s) return s.error();
  return uint64_t{v[0]} | uint64_t{v[1]} << 32;
}

Status VtestTransport::sync_write(uint32_t id, uint64_t value) {
  const uint32_t body[kSyncWriteSize] = {id, lo32(value), hi32(value)};
  return send_dwords(kCmdSyncWrite, body);
}

Result<UniqueFd> VtestTransport::sync_wait_fd(std::span<const VtestSyncPoint> points, bool any,
                                              uint32_t timeout_ms) {
  if (points.size() > (kMaxCapsetDwords - 2) / kSyncEntryDwords)
    return make_error(-E2BIG, "vtest: too many sync points");
  const uint32_t count = static_cast<uint32_t>(points.size());
  std::vector<uint32_t> body;
  body.reserve(sync_wait_size(count));
  body.push_back(any ? kSyncWaitFlagAny : 0);
  body.push_back(timeout_ms);
  for (const auto &p : points) {
    body.push_back(p.id);
    body.push_back(lo32(p.value));
    body.push_back(hi32(p.value));
  }
  if (auto s = send_dwords(kCmdSyncWait, body); !s) return s.error();
  auto len = sock_->recv_header(kCmdSyncWait);
  if (!len) return len.error();
  if (*len != 0) return unexpected_length(*sock_, "SYNC_WAIT", *len, 0);
  return sock_->recv_fd();
}

Status VtestTransport::submit_cmd2(std::span<const uint8_t> commands,
                                   std::span<const VtestSyncPoint> signals,
                                   std::optional<uint32_t> ring_idx) {
  if (commands.size() % 4) return make_error(-EINVAL, "vtest: command buffer not whole dwords");
  const uint64_t cmd_dw = commands.size() / 4;
  const uint64_t first = 1 + kSubmitCmd2BatchDwords;  // batch count + one batch
  const uint64_t total = first + cmd_dw + uint64_t{kSyncEntryDwords} * signals.size();
  if (total > std::numeric_limits<uint32_t>::max() / 4)
    return make_error(-E2BIG, "vtest: command buffer too large for one message");

  // Built in place, header included: command buffers can be large.
  std::vector<uint32_t> msg(kHeaderDwords + total, 0);
  msg[kHeaderLen] = static_cast<uint32_t>(total);
  msg[kHeaderCmd] = kCmdSubmitCmd2;
  uint32_t *body = msg.data() + kHeaderDwords;
  body[0] = 1;  // batch count
  uint32_t *batch = body + 1;
  batch[0] = ring_idx ? kSubmitCmd2FlagRingIdx : 0;
  batch[1] = static_cast<uint32_t>(first);           // cmd_offset
  batch[2] = static_cast<uint32_t>(cmd_dw);          // cmd_size
  batch[3] = static_cast<uint32_t>(first + cmd_dw);  // sync_offset
  batch[4] = static_cast<uint32_t>(signals.size());  // sync_count
  batch[5] = ring_idx ? *ring_idx : 0;               // ring_idx
  if (!commands.empty()) std::memcpy(body + first, commands.data(), commands.size());
  uint32_t *sync = body + first + cmd_dw;
  for (const auto &p : signals) {
    *sync++ = p.id;
    *sync++ = lo32(p.value);
    *sync++ = hi32(p.value);
  }
  return sock_->send({reinterpret_cast<const uint8_t *>(msg.data()), msg.size() * 4});
}

}  // namespace rvgl::guest
