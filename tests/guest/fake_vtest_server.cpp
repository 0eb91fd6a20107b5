#include "fake_vtest_server.h"

#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "vtest_wire.h"

namespace rvgl::guest::test {

using namespace rvgl::guest::vtest;

namespace {

bool read_exact(int fd, void *buf, size_t size) {
  auto *p = static_cast<uint8_t *>(buf);
  while (size) {
    const ssize_t n = ::read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool write_all(int fd, const void *buf, size_t size) {
  const auto *p = static_cast<const uint8_t *>(buf);
  while (size) {
    const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

UniqueFd make_memfd(uint64_t size) {
  UniqueFd fd(memfd_create("fake-vtest-res", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (fd && ftruncate(fd.get(), static_cast<off_t>(size)) != 0) fd.reset();
  return fd;
}

uint64_t u64(uint32_t lo, uint32_t hi) {
  return uint64_t{lo} | uint64_t{hi} << 32;
}

}  // namespace

std::vector<uint32_t> ReceivedMessage::dwords() const {
  std::vector<uint32_t> d((body.size() + 3) / 4, 0);
  if (!body.empty()) std::memcpy(d.data(), body.data(), body.size());
  return d;
}

FakeVtestServer::FakeVtestServer() {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw std::runtime_error("socketpair");
  server_.reset(sv[0]);
  client_.reset(sv[1]);
}

FakeVtestServer::~FakeVtestServer() {
  if (server_) ::shutdown(server_.get(), SHUT_RDWR);
  join();
}

UniqueFd FakeVtestServer::take_client() {
  return std::move(client_);
}

void FakeVtestServer::start() {
  thread_ = std::thread([this] { serve(); });
}

void FakeVtestServer::join() {
  if (thread_.joinable()) thread_.join();
}

void FakeVtestServer::serve() {
  for (;;) {
    uint32_t hdr[kHeaderDwords];
    if (!read_exact(server_.get(), hdr, sizeof(hdr))) break;
    ReceivedMessage m;
    m.len = hdr[kHeaderLen];
    m.cmd = hdr[kHeaderCmd];
    const uint64_t bytes = m.cmd == kCmdCreateRenderer ? uint64_t{m.len} : uint64_t{m.len} * 4;
    if (bytes > (64u << 20)) break;
    m.body.resize(bytes);
    if (bytes && !read_exact(server_.get(), m.body.data(), bytes)) break;
    {
      std::lock_guard<std::mutex> lock(mu_);
      messages_.push_back(m);
    }
    if (!handle(m)) break;
  }
  // Dropping the client, as vtest_server.c does on any error: the peer sees end of stream.
  ::shutdown(server_.get(), SHUT_RDWR);
}

bool FakeVtestServer::fault_applies(uint32_t cmd) {
  if (fault.kind == Fault::kNone || fault_used_ || fault.cmd != cmd) return false;
  fault_used_ = true;
  return true;
}

bool FakeVtestServer::reply(std::span<const uint32_t> dwords) {
  std::vector<uint32_t> out(dwords.begin(), dwords.end());
  if (fault_applies(out[kHeaderCmd])) {
    switch (fault.kind) {
      case Fault::kCloseBeforeReply:
        return false;
      case Fault::kCloseMidReply: {
        const size_t n = std::min(fault.bytes, out.size() * 4);
        write_all(server_.get(), out.data(), n);
        return false;
      }
      case Fault::kNoReply:
        return true;
      case Fault::kWrongId:
        out[kHeaderCmd] += 100;
        break;
      case Fault::kWrongLength:
        out[kHeaderLen] += 1;
        out.push_back(0);
        break;
      case Fault::kHugeLength:
        out[kHeaderLen] = 0x40000000u;
        break;
      default:
        fault_used_ = false;  // an fd fault: applies to send_fd
    }
  }
  return write_all(server_.get(), out.data(), out.size() * 4);
}

bool FakeVtestServer::send_fd(int fd) {
  // vtest_renderer.c vtest_send_fd: one '\0' byte carrying one fd.
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  int count = 1;
  if (fault.kind == Fault::kNoFd && !fault_used_) {
    fault_used_ = true;
    count = 0;
  } else if (fault.kind == Fault::kTwoFds && !fault_used_) {
    fault_used_ = true;
    count = 2;
  }
  if (count) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(count * sizeof(int));
    cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(count * sizeof(int));
    for (int i = 0; i < count; ++i)
      std::memcpy(CMSG_DATA(c) + i * sizeof(int), &fd, sizeof(int));
  }
  return ::sendmsg(server_.get(), &msg, MSG_NOSIGNAL) == 1;
}

bool FakeVtestServer::ensure_context() {
  // vtest_lazy_init_context: the context is made by the first command that needs it, and a
  // failure then drops the client.
  if (context_) return true;
  if (!context_capsets.count(context_capset_)) return false;
  context_ = true;
  return true;
}

bool FakeVtestServer::wait_ready(const Wait &w) const {
  size_t done = 0;
  for (const auto &[id, value] : w.points) {
    auto it = syncs_.find(id);
    if (it != syncs_.end() && it->second >= value) ++done;
  }
  return w.any ? done > 0 || w.points.empty() : done == w.points.size();
}

void FakeVtestServer::signal(uint32_t id, uint64_t value) {
  auto it = syncs_.find(id);
  if (it == syncs_.end()) return;
  it->second = value;  // vtest_signal_sync stores the value even when it goes down
  for (size_t i = 0; i < waits_.size();) {
    if (wait_ready(waits_[i])) {
      const uint64_t one = 1;
      (void)!::write(waits_[i].efd.get(), &one, sizeof(one));
      waits_.erase(waits_.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
}

void FakeVtestServer::release_fences() {
  std::lock_guard<std::mutex> lock(mu_);
  auto held = std::move(held_);
  held_.clear();
  for (const auto &[id, value] : held)
    signal(id, value);
}

void FakeVtestServer::drop() {
  ::shutdown(server_.get(), SHUT_RDWR);
}

bool FakeVtestServer::handle(const ReceivedMessage &m) {
  const auto d = m.dwords();
  auto need = [&](size_t n) { return d.size() == n; };

  if (!renderer_created_) {
    // vtest_server.c: the first command MUST be CREATE_RENDERER.
    if (m.cmd != kCmdCreateRenderer) return false;
    renderer_created_ = true;
    return true;
  }
  switch (m.cmd) {
    case kCmdPingProtocolVersion: {
      const uint32_t r[] = {kPingSize, kCmdPingProtocolVersion};
      return reply(r);
    }
    case kCmdProtocolVersion: {
      if (!need(1)) return false;
      const uint32_t v = std::min(d[0], max_protocol_version);
      const uint32_t r[] = {1, kCmdProtocolVersion, v};
      return reply(r);
    }
    case kCmdGetParam: {
      if (!need(1)) return false;
      const bool known = d[0] == kParamMaxTimelineCount;
      const uint32_t r[] = {2, kCmdGetParam, known ? 1u : 0u, known ? kMaxTimelines : 0u};
      return reply(r);
    }
    case kCmdGetCapset: {
      if (!need(2)) return false;
      auto it = capsets.find({d[0], d[1]});
      if (it == capsets.end()) {
        const uint32_t r[] = {1, kCmdGetCapset, 0};
        return reply(r);
      }
      std::vector<uint32_t> r = {static_cast<uint32_t>(1 + it->second.size() / 4), kCmdGetCapset,
                                 1};
      r.resize(3 + it->second.size() / 4);
      std::memcpy(&r[3], it->second.data(), it->second.size() / 4 * 4);
      return reply(r);
    }
    case kCmdContextInit: {
      if (!need(1) || d[0] == 0) return false;
      if (context_) return d[0] == context_capset_;
      context_capset_ = d[0];
      return true;
    }
    case kCmdResourceCreateBlob: {
      if (!need(kResCreateBlobSize) || !ensure_context()) return false;
      const BlobRequest b{d[0], d[1], u64(d[2], d[3]), u64(d[4], d[5])};
      {
        std::lock_guard<std::mutex> lock(mu_);
        blobs_.push_back(b);
      }
      UniqueFd fd;
      const bool guest = b.blob_mem == 1 || b.blob_mem == 3;
      if (guest)
        fd = make_memfd(b.size);
      else if (b.blob_mem == 2)
        fd = on_host3d_blob ? on_host3d_blob(b) : make_memfd(b.size);
      if (!fd) return false;
      if (fault.kind == Fault::kShortFile && fault_applies(m.cmd))
        if (ftruncate(fd.get(), static_cast<off_t>(b.size / 2)) != 0) return false;
      const uint32_t res = next_res_++;
      const uint32_t r[] = {1, kCmdResourceCreateBlob, res};
      if (!reply(r) || !send_fd(fd.get())) return false;
      if (guest) {
        std::lock_guard<std::mutex> lock(mu_);
        guest_memfds_[res] = std::move(fd);
      }
      return true;
    }
    case kCmdResourceUnref: {
      if (!need(1) || !ensure_context()) return false;
      std::lock_guard<std::mutex> lock(mu_);
      unrefs_.push_back(d[0]);
      guest_memfds_.erase(d[0]);
      return true;
    }
    case kCmdSyncCreate: {
      if (!need(2) || !ensure_context()) return false;
      uint32_t id;
      {
        std::lock_guard<std::mutex> lock(mu_);
        id = next_sync_++;
        syncs_[id] = u64(d[0], d[1]);
      }
      const uint32_t r[] = {1, kCmdSyncCreate, id};
      return reply(r);
    }
    case kCmdSyncUnref: {
      if (!need(1) || !ensure_context()) return false;
      std::lock_guard<std::mutex> lock(mu_);
      syncs_.erase(d[0]);
      return true;
    }
    case kCmdSyncRead: {
      if (!need(1) || !ensure_context()) return false;
      uint64_t v;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = syncs_.find(d[0]);
        if (it == syncs_.end()) return false;  // -EEXIST: the client is dropped
        v = it->second;
      }
      const uint32_t r[] = {2, kCmdSyncRead, static_cast<uint32_t>(v),
                            static_cast<uint32_t>(v >> 32)};
      return reply(r);
    }
    case kCmdSyncWrite: {
      if (!need(3) || !ensure_context()) return false;
      std::lock_guard<std::mutex> lock(mu_);
      if (!syncs_.count(d[0])) return false;
      signal(d[0], u64(d[1], d[2]));
      return true;
    }
    case kCmdSyncWait: {
      if (!ensure_context() || d.size() < 2 || (d.size() - 2) % 3) return false;
      Wait w;
      w.any = d[0] & kSyncWaitFlagAny;
      const uint32_t timeout = d[1];
      for (size_t i = 2; i < d.size(); i += 3)
        w.points.push_back({d[i], u64(d[i + 1], d[i + 2])});
      w.efd.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
      if (!w.efd) return false;
      bool ready;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto &p : w.points)
          if (!syncs_.count(p.first)) return false;  // -EEXIST
        ready = wait_ready(w);
      }
      if (ready) {
        const uint64_t one = 1;
        (void)!::write(w.efd.get(), &one, sizeof(one));
      }
      const uint32_t r[] = {0, kCmdSyncWait};
      if (!reply(r) || !send_fd(w.efd.get())) return false;
      if (!ready && timeout != 0) {
        std::lock_guard<std::mutex> lock(mu_);
        waits_.push_back(std::move(w));
      }
      return true;
    }
    case kCmdSubmitCmd2: {
      if (!ensure_context() || d.empty()) return false;
      const uint64_t count = d[0];
      if (1 + count * kSubmitCmd2BatchDwords > d.size()) return false;
      for (uint64_t i = 0; i < count; ++i) {
        const uint32_t *b = &d[1 + i * kSubmitCmd2BatchDwords];
        SubmitRecord rec;
        rec.flags = b[0];
        rec.ring_idx = b[5];
        const uint64_t cmd_off = b[1], cmd_size = b[2], sync_off = b[3], sync_count = b[4];
        if (cmd_off + cmd_size > d.size() || sync_off + sync_count * 3 > d.size() ||
            rec.ring_idx >= kMaxTimelines)
          return false;
        rec.commands.resize(cmd_size * 4);
        if (cmd_size) std::memcpy(rec.commands.data(), &d[cmd_off], cmd_size * 4);
        for (uint64_t s = 0; s < sync_count; ++s) {
          const uint32_t *e = &d[sync_off + s * 3];
          rec.syncs.push_back({e[0], u64(e[1], e[2])});
        }
        if (on_submit) on_submit(rec);
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto &[id, value] : rec.syncs) {
          if (!syncs_.count(id)) return false;
          if ((rec.flags & kSubmitCmd2FlagRingIdx) && hold_ring_fences)
            held_.push_back({id, value});
          else
            signal(id, value);
        }
        submits_.push_back(std::move(rec));
      }
      return true;
    }
    default:
      return false;  // VTEST_CLIENT_ERROR_COMMAND_ID / _UNEXPECTED
  }
}

std::vector<ReceivedMessage> FakeVtestServer::messages() const {
  std::lock_guard<std::mutex> lock(mu_);
  return messages_;
}
std::vector<BlobRequest> FakeVtestServer::blobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return blobs_;
}
std::vector<SubmitRecord> FakeVtestServer::submits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return submits_;
}
std::vector<uint32_t> FakeVtestServer::unrefs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unrefs_;
}
uint64_t FakeVtestServer::sync_value(uint32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = syncs_.find(id);
  return it == syncs_.end() ? ~0ull : it->second;
}
size_t FakeVtestServer::live_syncs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return syncs_.size();
}
bool FakeVtestServer::context_created() const {
  return context_;
}
std::vector<std::pair<uint32_t, int>> FakeVtestServer::memfds() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<uint32_t, int>> out;
  for (const auto &[res, fd] : guest_memfds_)
    out.push_back({res, fd.get()});
  return out;
}

}  // namespace rvgl::guest::test
