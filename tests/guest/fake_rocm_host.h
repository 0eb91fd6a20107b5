// The host behind both fake transports of the session tests (test_session.cpp over vtest,
// test_virtgpu_session.cpp over virtio-gpu): the context's real FrameDecoder answering into a
// shared page kept in a memfd, with handlers that answer predictably.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "context/command_layouts.h"
#include "context/command_table.h"
#include "context/frame_decoder.h"
#include "context/shmem_view.h"
#include "rvgl_mapping.h"
#include "rvgl_unique_fd.h"

namespace rvgl::guest::test {

inline std::vector<uint8_t> bytes_of(const rvgl_capset &c) {
  std::vector<uint8_t> b(sizeof(c));
  std::memcpy(b.data(), &c, sizeof(c));
  return b;
}

constexpr uint32_t kFakeHostMaxSubmit = 64 * 1024;

// The capset such a host offers; the tests tell their hosts apart by features and name.
inline rvgl_capset fake_host_capset(uint32_t features, const char *name) {
  rvgl_capset c{};
  c.wire_format_version = RVGL_WIRE_FORMAT_VERSION;
  c.protocol_major = RVGL_PROTOCOL_MAJOR;
  c.shmem_size = RVGL_SHMEM_SIZE;
  c.max_submit_bytes = kFakeHostMaxSubmit;
  c.features = features;
  std::strncpy(c.marketing_name, name, sizeof(c.marketing_name) - 1);
  return c;
}

class FakeRocmHost {
 public:
  // QUERY_INFO answers timestamp_base + the request's seqno as its timestamp (which tells
  // responses apart); BO_CREATE answers `bo` (size 0: -EINVAL); NOP answers 0.
  FakeRocmHost(uint64_t timestamp_base, uint32_t bo) : timestamp_base_(timestamp_base), bo_(bo) {
    add(RVGL_CMD_NOP, [](void *, const rvgl::Request &, rvgl::Response &) { return 0; });
    add(RVGL_CMD_QUERY_INFO, [](void *self, const rvgl::Request &req, rvgl::Response &rsp) {
      auto &r = rsp.as<rvgl_rsp_query_info>();
      r.query = req.as<rvgl_req_query_info>().query;
      r.size = 8;
      r.data.timestamp.gpu_timestamp =
          static_cast<FakeRocmHost *>(self)->timestamp_base_ + req.seqno;
      return 0;
    });
    add(RVGL_CMD_BO_CREATE, [](void *self, const rvgl::Request &req, rvgl::Response &rsp) {
      if (req.as<rvgl_req_bo_create>().size == 0) return -EINVAL;
      rsp.as<rvgl_rsp_bo_create>().bo = static_cast<FakeRocmHost *>(self)->bo_;
      return 0;
    });
    dec_ = std::make_unique<rvgl::FrameDecoder>(table_, this, kFakeHostMaxSubmit);
  }
  FakeRocmHost(const FakeRocmHost &) = delete;
  FakeRocmHost &operator=(const FakeRocmHost &) = delete;

  // Another handler; its `target` is this host (a derived test host casts it back).
  void add(uint32_t cmd, rvgl::Handler h) {
    const auto *l = rvgl::find_layout(cmd);
    table_.set(cmd, {l->name, h, l->req_size, l->rsp_size});
  }

  // The shared page a session asks for (-EINVAL for any other blob); its header is laid out
  // unless init_header was cleared.
  int make_shared_page(uint64_t blob_id, uint32_t blob_flags, uint64_t size, UniqueFd *out) {
    if (blob_id != 0 || blob_flags != RVGL_BLOB_FLAG_USE_MAPPABLE || size != RVGL_SHMEM_SIZE)
      return -EINVAL;
    shm_fd_.reset(memfd_create("rvgl-shmem", MFD_CLOEXEC));
    if (!shm_fd_ || ftruncate(shm_fd_.get(), RVGL_SHMEM_SIZE) != 0) return -ENOMEM;
    shm_ = std::move(*Mapping::map_shared(shm_fd_.get(), RVGL_SHMEM_SIZE));
    view = rvgl::ShmemView(shm_.data(), shm_.size());
    if (init_header) view.init_header();
    out->reset(dup(shm_fd_.get()));
    return 0;
  }

  void decode(std::span<const uint8_t> commands) { dec_->run(commands, view); }

  // An event record in the shared page's ring, as the host's health owner posts one.
  void push_event(uint32_t type) {
    auto *h = view.header();
    rvgl_event ev{};
    ev.seq = h->event_wptr + 1;
    ev.type = type;
    std::memcpy(view.base() + RVGL_EVENT_RING_OFFSET +
                    (h->event_wptr % RVGL_EVENT_RING_ENTRIES) * sizeof(ev),
                &ev, sizeof(ev));
    __atomic_store_n(&h->event_wptr, h->event_wptr + 1, __ATOMIC_RELEASE);
  }

  bool init_header = true;
  rvgl::ShmemView view;

 private:
  uint64_t timestamp_base_;
  uint32_t bo_;
  UniqueFd shm_fd_;
  Mapping shm_;
  rvgl::CommandTable table_;
  std::unique_ptr<rvgl::FrameDecoder> dec_;
};

}  // namespace rvgl::guest::test
