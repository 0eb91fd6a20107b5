// Harness 3, vtest: the input is everything a (hostile or broken) vtest server sends back. The
// guest library's vtest transport talks to it over a socketpair: handshake, capset, context,
// blobs, submits, syncs. Every reply is untrusted; the transport must end in a clean error, never
// a crash, an overread or a hang. (The stock server's own dispatch is not reachable in-process:
// it lives in virgl_test_server, not in libvirglrenderer.)
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "rvgl_guest.h"

using namespace rvgl::guest;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) return 0;
  // The "server" has said all it will say: the client sees these bytes, then end of stream.
  size_t off = 0;
  while (off < size) {
    const ssize_t n = send(sv[1], data + off, size - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  shutdown(sv[1], SHUT_WR);
  VtestOptions opt;
  opt.reply_timeout = std::chrono::milliseconds(50);
  auto t = VtestTransport::adopt(rvgl::guest::UniqueFd(sv[0]), opt);
  if (t.ok()) {
    VtestTransport &v = *t.value();
    (void)v.get_capset(RVGL_CAPSET_ID, RVGL_CAPSET_VERSION);
    (void)v.init_context(RVGL_CAPSET_ID, 64);
    (void)v.max_timeline_count();
    BlobParams host;
    host.size = RVGL_SHMEM_SIZE;
    auto b = v.create_blob(host);
    if (b.ok()) (void)v.map_blob(b.value());
    std::vector<uint8_t> mem(8192, 0x5a);
    BlobParams guest;
    guest.blob_mem = RVGL_BLOB_MEM_GUEST;
    guest.blob_flags = RVGL_BLOB_FLAG_USERPTR;
    guest.size = mem.size();
    guest.guest_memory = mem;
    (void)v.create_blob(guest);
    const uint8_t cmd[16] = {1, 0, 0, 0, 16, 0, 0, 0, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
    SubmitParams sp;
    sp.commands = cmd;
    sp.ring_idx = 1;
    auto f = v.submit(sp);
    if (f.ok()) (void)v.wait(f.value(), std::chrono::milliseconds(10));
    auto s = v.sync_create(1);
    if (s.ok()) (void)v.sync_read(s.value());
  }
  close(sv[1]);
  return 0;
}
