#include "vtest_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

#include "vtest_wire.h"

namespace rvgl::guest::vtest {

namespace {

std::string errno_text(int e) {
  return std::strerror(e);
}

}  // namespace

Result<UniqueFd> Socket::connect_unix(const std::string &path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path))
    return make_error(-ENAMETOOLONG, "vtest: socket path empty or too long for AF_UNIX");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return make_error(-errno, "vtest: socket: " + errno_text(errno));
  int r;
  do {
    r = ::connect(fd.get(), reinterpret_cast<const sockaddr *>(&addr), sizeof(addr));
  } while (r < 0 && errno == EINTR);
  if (r < 0) return make_error(-errno, "vtest: connect " + path + ": " + errno_text(errno));
  return fd;
}

Error Socket::fail(int code, std::string message) {
  if (!failed_) {
    failed_ = true;
    failure_ = make_error(code, "vtest: " + std::move(message));
    fds_.clear();
  }
  return failure_;
}

Error Socket::failed_error() const {
  return make_error(failure_.code, "vtest: connection unusable after: " + failure_.message);
}

Socket::Clock::time_point Socket::deadline() const {
  const auto now = Clock::now();
  if (timeout_ >= (Clock::time_point::max() - now)) return Clock::time_point::max();
  return now + timeout_;
}

Status Socket::wait_ready(short events, Clock::time_point deadline) {
  for (;;) {
    int ms = -1;
    if (deadline != Clock::time_point::max()) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return fail(-ETIMEDOUT, "server did not answer in time");
      ms = left > 0x7fffffff ? 0x7fffffff : static_cast<int>(left);
    }
    pollfd p{fd_.get(), events, 0};
    const int r = ::poll(&p, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return fail(-errno, "poll: " + errno_text(errno));
    if (r == 0) continue;  // re-check the deadline
    // POLLHUP/POLLERR: let the following read or write report what happened.
    return {};
  }
}

Status Socket::send(std::span<const uint8_t> bytes) {
  if (failed_) return failed_error();
  const auto until = deadline();
  size_t done = 0;
  while (done < bytes.size()) {
    // MSG_NOSIGNAL: a server that went away must give EPIPE, not kill the guest with SIGPIPE.
    const ssize_t n =
        ::send(fd_.get(), bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (auto s = wait_ready(POLLOUT, until); !s) return s;
        continue;
      }
      return fail(-errno, "send: " + errno_text(errno));
    }
    done += static_cast<size_t>(n);
  }
  return {};
}

Result<size_t> Socket::recv_some(void *buf, size_t size, Clock::time_point until) {
  for (;;) {
    iovec iov{buf, size};
    alignas(cmsghdr) char control[CMSG_SPACE(8 * sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = ::recvmsg(fd_.get(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (auto s = wait_ready(POLLIN, until); !s) return s.error();
        continue;
      }
      return fail(-errno, "recv: " + errno_text(errno));
    }
    // Take ownership of every fd first, so none leaks whatever happens next.
    for (cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds_.emplace_back(fd);
      }
    }
    if (msg.msg_flags & MSG_CTRUNC) return fail(-EPROTO, "server sent more fds than expected");
    if (n == 0) return fail(-ECONNRESET, "server closed the connection");
    return static_cast<size_t>(n);
  }
}

Status Socket::recv_exact(void *buf, size_t size) {
  if (failed_) return failed_error();
  const auto until = deadline();
  auto *p = static_cast<uint8_t *>(buf);
  size_t done = 0;
  while (done < size) {
    auto n = recv_some(p + done, size - done, until);
    if (!n) return n.error();
    done += *n;
  }
  if (!fds_.empty()) return fail(-EPROTO, "server sent an fd where none was expected");
  return {};
}

Result<UniqueFd> Socket::recv_fd() {
  if (failed_) return failed_error();
  uint8_t byte;
  auto n = recv_some(&byte, 1, deadline());
  if (!n) return n.error();
  if (fds_.size() != 1)
    return fail(-EPROTO, fds_.empty() ? "expected an fd from the server, none came"
                                      : "server sent several fds where one was expected");
  UniqueFd fd = std::move(fds_.front());
  fds_.pop_front();
  return fd;
}

Result<uint32_t> Socket::recv_header(uint32_t cmd) {
  uint32_t hdr[kHeaderDwords];
  if (auto s = recv_exact(hdr, sizeof(hdr)); !s) return s.error();
  if (hdr[kHeaderCmd] != cmd)
    return fail(-EPROTO, "reply to command " + std::to_string(cmd) + " carries id " +
                             std::to_string(hdr[kHeaderCmd]));
  return hdr[kHeaderLen];
}

}  // namespace rvgl::guest::vtest
