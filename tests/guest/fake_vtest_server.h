// A vtest protocol 3 server in a thread, speaking as virglrenderer 0.10.4's vtest_renderer.c does
// (same replies, same fd passing with one byte, same habit of dropping the client on errors), so
// the guest transport can be tested byte for byte without the real server. It records every
// message it receives, and can be told to misbehave.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <thread>
#include <vector>

#include "rvgl_unique_fd.h"

namespace rvgl::guest::test {

struct ReceivedMessage {
  uint32_t len = 0;  // the header's length field, as sent
  uint32_t cmd = 0;
  std::vector<uint8_t> body;
  std::vector<uint32_t> dwords() const;  // the body as dwords (CREATE_RENDERER: padded with 0)
};

struct BlobRequest {
  uint32_t blob_mem, blob_flags;
  uint64_t size, blob_id;
};

struct SubmitRecord {
  uint32_t flags = 0;
  uint32_t ring_idx = 0;
  std::vector<uint8_t> commands;
  std::vector<std::pair<uint32_t, uint64_t>> syncs;
};

// What the server does wrong, on the first message with command id `cmd`.
struct Fault {
  enum Kind {
    kNone,
    kCloseBeforeReply,  // drop the connection instead of answering
    kCloseMidReply,     // send `bytes` bytes of the reply, then drop the connection
    kNoReply,           // never answer (the client must time out)
    kWrongId,           // answer with another command id
    kWrongLength,       // answer with length + 1 (and that many dwords)
    kNoFd,              // send the fd byte without an fd
    kTwoFds,            // send two fds with the byte
    kHugeLength,        // answer GET_CAPSET with a length of 0x40000000 dwords
    kShortFile,         // pass a blob fd whose file is smaller than the blob
  };
  Kind kind = kNone;
  uint32_t cmd = 0;
  size_t bytes = 0;
};

class FakeVtestServer {
 public:
  FakeVtestServer();
  ~FakeVtestServer();
  FakeVtestServer(const FakeVtestServer &) = delete;
  FakeVtestServer &operator=(const FakeVtestServer &) = delete;

  // The client's end of the socketpair; hand it to VtestTransport::adopt.
  UniqueFd take_client();
  // Starts serving (configure first).
  void start();
  // Waits until the server thread has finished (client gone or connection dropped).
  void join();

  // ---- configuration, before start() ----
  uint32_t max_protocol_version = 3;
  std::map<std::pair<uint32_t, uint32_t>, std::vector<uint8_t>> capsets;  // (id, version) -> caps
  std::set<uint32_t> context_capsets;  // CONTEXT_INIT works for these; others fail lazily
  Fault fault;
  bool hold_ring_fences = false;  // syncs of SUBMIT_CMD2 with a ring index wait for release
  // The context: called with each SUBMIT_CMD2 batch's commands (on the server thread).
  std::function<void(const SubmitRecord &)> on_submit;
  // HOST3D blobs: the fd to pass (an invalid fd makes creation fail, dropping the client).
  std::function<UniqueFd(const BlobRequest &)> on_host3d_blob;

  // ---- inspection, any time (thread-safe) ----
  std::vector<ReceivedMessage> messages() const;
  std::vector<BlobRequest> blobs() const;
  std::vector<SubmitRecord> submits() const;
  std::vector<uint32_t> unrefs() const;
  uint64_t sync_value(uint32_t id) const;
  size_t live_syncs() const;
  bool context_created() const;
  std::vector<std::pair<uint32_t, int>> memfds() const;  // (res_id, server-side fd) of guest blobs

  // Signals every held ring fence, as the context's retire would.
  void release_fences();
  // Drops the client now, from the test's thread (a server that dies).
  void drop();

 private:
  struct Wait {
    UniqueFd efd;
    bool any;
    std::vector<std::pair<uint32_t, uint64_t>> points;
  };

  void serve();
  bool handle(const ReceivedMessage &m);
  bool reply(std::span<const uint32_t> dwords);
  bool send_fd(int fd);
  bool ensure_context();
  void signal(uint32_t id, uint64_t value);  // with mu_ held
  bool wait_ready(const Wait &w) const;      // with mu_ held
  bool fault_applies(uint32_t cmd);

  UniqueFd server_;
  UniqueFd client_;
  std::thread thread_;
  bool fault_used_ = false;
  bool renderer_created_ = false;
  uint32_t context_capset_ = 0;
  std::atomic<bool> context_{false};
  uint32_t next_res_ = 1;
  uint32_t next_sync_ = 1;

  mutable std::mutex mu_;
  std::vector<ReceivedMessage> messages_;
  std::vector<BlobRequest> blobs_;
  std::vector<SubmitRecord> submits_;
  std::vector<uint32_t> unrefs_;
  std::map<uint32_t, uint64_t> syncs_;
  std::vector<Wait> waits_;
  std::vector<std::pair<uint32_t, uint64_t>> held_;
  std::map<uint32_t, UniqueFd> guest_memfds_;
};

}  // namespace rvgl::guest::test
