// Byte-exact I/O on a vtest connection: whole messages out, exact reads in, fds received over
// SCM_RIGHTS, every wait bounded by a deadline.
//
// The server is not trusted. Any I/O error, early close, timeout or protocol surprise latches the
// connection as failed: the stream position is unknown from then on, so every later call reports
// the first failure instead of reading garbage.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>

#include "rvgl_result.h"
#include "rvgl_unique_fd.h"

namespace rvgl::guest::vtest {

class Socket {
 public:
  using Clock = std::chrono::steady_clock;

  Socket() = default;
  Socket(UniqueFd fd, std::chrono::milliseconds timeout) : fd_(std::move(fd)), timeout_(timeout) {}

  static Result<UniqueFd> connect_unix(const std::string &path);

  // Sends all of `bytes` (one or more whole messages).
  Status send(std::span<const uint8_t> bytes);
  // Reads exactly `size` bytes. An fd arriving with them is a protocol error.
  Status recv_exact(void *buf, size_t size);
  // Reads the one byte vtest sends with an fd (vtest_renderer.c vtest_send_fd) and returns the fd.
  Result<UniqueFd> recv_fd();

  // Reads a reply header and checks it answers `cmd`; returns the length field.
  Result<uint32_t> recv_header(uint32_t cmd);

  Error fail(int code, std::string message);
  bool failed() const { return failed_; }
  const Error &failure() const { return failure_; }
  int fd() const { return fd_.get(); }
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  // One recvmsg of at most `size` bytes; fds that arrive are kept in fds_.
  Result<size_t> recv_some(void *buf, size_t size, Clock::time_point deadline);
  Status wait_ready(short events, Clock::time_point deadline);
  Error failed_error() const;
  Clock::time_point deadline() const;

  UniqueFd fd_;
  std::chrono::milliseconds timeout_{30000};
  std::deque<UniqueFd> fds_;
  bool failed_ = false;
  Error failure_;
};

}  // namespace rvgl::guest::vtest
