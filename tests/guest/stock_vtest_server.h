// Runs Debian's stock virgl_test_server on a private socket for the length of a test, and stops
// it (only the process it started) afterwards.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

namespace rvgl::guest::test {

class StockVtestServer {
 public:
  // `preload` may be empty. Fails (started() false) when the binary is missing.
  StockVtestServer(const std::string &binary, const std::string &preload);
  ~StockVtestServer();
  StockVtestServer(const StockVtestServer &) = delete;
  StockVtestServer &operator=(const StockVtestServer &) = delete;

  bool started() const { return pid_ > 0; }
  // Waits until the socket accepts connections; false if the server exited or time ran out.
  bool wait_listening(int timeout_ms);
  const std::string &socket_path() const { return socket_; }
  std::string log() const;  // what the server printed

 private:
  std::filesystem::path dir_;
  std::string socket_;
  pid_t pid_ = -1;
};

}  // namespace rvgl::guest::test
