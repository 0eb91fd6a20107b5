// Acceptance: syncobjs signal from a CS out-chunk, wait, carry timeline points, and survive an
// export/import round trip (as a syncobj fd and as a sync_file).
#include <poll.h>
#include <xf86drm.h>

#include <catch2/catch.hpp>

#include "emu_test_support.h"

using namespace rvgl::emu_test;

namespace {

struct Submitter {
  Fd fd = open_render();
  GpuBuffer buf;
  uint32_t ctx = 0;
  Submitter() {
    REQUIRE(fd.get() >= 0);
    REQUIRE(buf.create(fd.get(), 64 * 1024, 0x800000) == 0);
    REQUIRE(ctx_create(fd.get(), &ctx) == 0);
  }
  // An SDMA job that first waits for memory at `poll_off` to hold `poll_value`, then writes `value`
  // at `out_off`; `chunks` add syncobj waits/signals.
  uint64_t job(uint32_t ib_off, uint32_t out_off, uint32_t value,
               const std::vector<drm_amdgpu_cs_chunk> &chunks, int poll_off = -1,
               uint32_t poll_value = 0) {
    std::vector<uint32_t> ib;
    if (poll_off >= 0) sdma::poll_mem_equal(ib, buf.va + poll_off, poll_value);
    sdma::fence(ib, buf.va + out_off, value);
    uint64_t seq = 0;
    REQUIRE(submit(fd.get(), ctx, AMDGPU_HW_IP_DMA, 0, place_ib(buf, ib_off, ib), ib.size() * 4,
                   &seq, chunks) == 0);
    return seq;
  }
};

drm_amdgpu_cs_chunk chunk(uint32_t id, const void *data, size_t bytes) {
  return {id, static_cast<uint32_t>(bytes / 4), reinterpret_cast<uintptr_t>(data)};
}

}  // namespace

TEST_CASE("a CS out-syncobj signals when the job completes", "[syncobj][acceptance]") {
  Submitter s;
  const int fd = s.fd.get();
  uint32_t so = 0;
  REQUIRE(drmSyncobjCreate(fd, 0, &so) == 0);
  // Without WAIT_FOR_SUBMIT a syncobj with no fence is an error, with it a timeout.
  CHECK(drmSyncobjWait(fd, &so, 1, 0, 0, nullptr) == -EINVAL);
  CHECK(drmSyncobjWait(fd, &so, 1, 0, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, nullptr) == -ETIME);

  drm_amdgpu_cs_chunk_sem out{so};
  s.buf.u32()[1000] = 0;
  s.job(0, 64, 7, {chunk(AMDGPU_CHUNK_ID_SYNCOBJ_OUT, &out, sizeof(out))}, 4000, 1);
  // The job polls memory the test has not written yet: the syncobj must not be signaled.
  CHECK(drmSyncobjWait(fd, &so, 1, abs_timeout_ms(30), 0, nullptr) == -ETIME);
  s.buf.u32()[1000] = 1;
  CHECK(drmSyncobjWait(fd, &so, 1, INT64_MAX, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL, nullptr) == 0);
  CHECK(s.buf.u32()[16] == 7);

  // RESET drops the fence again; SIGNAL installs a signaled one.
  REQUIRE(drmSyncobjReset(fd, &so, 1) == 0);
  CHECK(drmSyncobjWait(fd, &so, 1, 0, 0, nullptr) == -EINVAL);
  REQUIRE(drmSyncobjSignal(fd, &so, 1) == 0);
  CHECK(drmSyncobjWait(fd, &so, 1, 0, 0, nullptr) == 0);
  REQUIRE(drmSyncobjDestroy(fd, so) == 0);
  errno = 0;
  CHECK(drmSyncobjDestroy(fd, so) == -1);
  CHECK(errno == EINVAL);
}

TEST_CASE("timeline points order jobs and report progress", "[syncobj][acceptance]") {
  Submitter s;
  const int fd = s.fd.get();
  uint32_t tl_in = 0, tl_out = 0;
  REQUIRE(drmSyncobjCreate(fd, 0, &tl_in) == 0);
  REQUIRE(drmSyncobjCreate(fd, 0, &tl_out) == 0);

  // The job waits for point 3 of tl_in (not yet submitted: WAIT_FOR_SUBMIT), signals point 5.
  drm_amdgpu_cs_chunk_syncobj wait{tl_in, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, 3};
  drm_amdgpu_cs_chunk_syncobj sig{tl_out, 0, 5};
  s.job(0, 128, 0x55,
        {chunk(AMDGPU_CHUNK_ID_SYNCOBJ_TIMELINE_WAIT, &wait, sizeof(wait)),
         chunk(AMDGPU_CHUNK_ID_SYNCOBJ_TIMELINE_SIGNAL, &sig, sizeof(sig))});
  uint64_t point = 5, value = 0;
  CHECK(drmSyncobjTimelineWait(fd, &tl_out, &point, 1, abs_timeout_ms(30), 0, nullptr) == -ETIME);
  CHECK(drmSyncobjTimelineWait(fd, &tl_out, &point, 1, 0, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE,
                               nullptr) == 0);
  REQUIRE(drmSyncobjQuery2(fd, &tl_out, &value, 1, DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED) == 0);
  CHECK(value == 5);
  REQUIRE(drmSyncobjQuery(fd, &tl_out, &value, 1) == 0);
  CHECK(value == 0);
  CHECK(s.buf.u32()[32] == 0);

  // Point 2 is not enough; point 3 releases the job.
  uint64_t p2 = 2, p3 = 3;
  REQUIRE(drmSyncobjTimelineSignal(fd, &tl_in, &p2, 1) == 0);
  CHECK(drmSyncobjTimelineWait(fd, &tl_out, &point, 1, abs_timeout_ms(30), 0, nullptr) == -ETIME);
  REQUIRE(drmSyncobjTimelineSignal(fd, &tl_in, &p3, 1) == 0);
  CHECK(drmSyncobjTimelineWait(fd, &tl_out, &point, 1, abs_timeout_ms(5000), 0, nullptr) == 0);
  CHECK(s.buf.u32()[32] == 0x55);
  REQUIRE(drmSyncobjQuery(fd, &tl_out, &value, 1) == 0);
  CHECK(value == 5);
  // Asking for a point not submitted yet, without WAIT_FOR_SUBMIT, is an error.
  uint64_t p9 = 9;
  CHECK(drmSyncobjTimelineWait(fd, &tl_out, &p9, 1, 0, 0, nullptr) == -EINVAL);
  // Earlier points are satisfied by a later one.
  uint64_t p1 = 1;
  CHECK(drmSyncobjTimelineWait(fd, &tl_out, &p1, 1, 0, 0, nullptr) == 0);

  // Transfer point 5 of tl_out to a binary syncobj.
  uint32_t bin = 0;
  REQUIRE(drmSyncobjCreate(fd, 0, &bin) == 0);
  REQUIRE(drmSyncobjTransfer(fd, bin, 0, tl_out, 5, 0) == 0);
  CHECK(drmSyncobjWait(fd, &bin, 1, 0, 0, nullptr) == 0);
  errno = 0;
  CHECK(drmSyncobjTransfer(fd, bin, 0, tl_out, 99, 0) == -1);
  CHECK(errno == EINVAL);
  for (uint32_t h : {tl_in, tl_out, bin})
    drmSyncobjDestroy(fd, h);
}

TEST_CASE("syncobjs round-trip through fds and sync files", "[syncobj][acceptance]") {
  Submitter s;
  const int fd = s.fd.get();
  Fd other = open_render();  // another file: handles do not carry over, fds do
  uint32_t so = 0;
  REQUIRE(drmSyncobjCreate(fd, 0, &so) == 0);
  drm_amdgpu_cs_chunk_sem out{so};
  s.buf.u32()[1000] = 0;
  s.job(0, 64, 9, {chunk(AMDGPU_CHUNK_ID_SYNCOBJ_OUT, &out, sizeof(out))}, 4000, 1);

  int obj_fd = -1;
  REQUIRE(drmSyncobjHandleToFD(fd, so, &obj_fd) == 0);
  uint32_t imported = 0;
  REQUIRE(drmSyncobjFDToHandle(other.get(), obj_fd, &imported) == 0);
  close(obj_fd);

  int sync_file = -1;
  REQUIRE(drmSyncobjExportSyncFile(fd, so, &sync_file) == 0);
  pollfd p{sync_file, POLLIN, 0};
  CHECK(poll(&p, 1, 0) == 0);  // not signaled yet
  uint32_t from_file = 0;
  REQUIRE(drmSyncobjCreate(other.get(), 0, &from_file) == 0);
  REQUIRE(drmSyncobjImportSyncFile(other.get(), from_file, sync_file) == 0);
  CHECK(drmSyncobjWait(other.get(), &imported, 1, abs_timeout_ms(20), 0, nullptr) == -ETIME);

  s.buf.u32()[1000] = 1;  // let the job finish
  CHECK(drmSyncobjWait(other.get(), &imported, 1, abs_timeout_ms(5000), 0, nullptr) == 0);
  CHECK(drmSyncobjWait(other.get(), &from_file, 1, abs_timeout_ms(5000), 0, nullptr) == 0);
  CHECK(poll(&p, 1, 5000) == 1);
  CHECK((p.revents & POLLIN) != 0);
  close(sync_file);

  // WAIT any: the first signaled handle is reported.
  uint32_t pending = 0;
  REQUIRE(drmSyncobjCreate(other.get(), 0, &pending) == 0);
  uint32_t pair[2] = {pending, imported};
  uint32_t first = 99;
  CHECK(drmSyncobjWait(other.get(), pair, 2, abs_timeout_ms(1000),
                       DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, &first) == 0);
  CHECK(first == 1);
  CHECK(drmSyncobjWait(other.get(), pair, 2, abs_timeout_ms(20),
                       DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL | DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
                       &first) == -ETIME);
  // A handle that was never created.
  uint32_t bogus = 999;
  CHECK(drmSyncobjWait(other.get(), &bogus, 1, 0, 0, nullptr) == -ENOENT);
}

TEST_CASE("FENCE_TO_HANDLE and WAIT_FENCES see CS fences", "[syncobj]") {
  Submitter s;
  const int fd = s.fd.get();
  s.buf.u32()[1000] = 0;
  const uint64_t seq = s.job(0, 64, 3, {}, 4000, 1);
  drm_amdgpu_fence_to_handle f2h{};
  f2h.in.fence = {s.ctx, AMDGPU_HW_IP_DMA, 0, 0, seq};
  f2h.in.what = AMDGPU_FENCE_TO_HANDLE_GET_SYNCOBJ;
  REQUIRE(xioctl(fd, DRM_IOCTL_AMDGPU_FENCE_TO_HANDLE, &f2h) == 0);
  uint32_t so = f2h.out.handle;
  CHECK(drmSyncobjWait(fd, &so, 1, abs_timeout_ms(20), 0, nullptr) == -ETIME);

  const drm_amdgpu_fence fence{s.ctx, AMDGPU_HW_IP_DMA, 0, 0, seq};
  drm_amdgpu_wait_fences_out out{};
  REQUIRE(wait_fence(fd, fence, true, abs_timeout_ms(20), &out) == 0);
  CHECK(out.status == 0);  // not signaled within the timeout
  // Sequence ~0 is the context's newest job on that ring (amdgpu_ctx_get_fence()).
  CHECK(wait_cs(fd, s.ctx, AMDGPU_HW_IP_DMA, 0, ~uint64_t{0}, 0) == 1);  // busy

  s.buf.u32()[1000] = 1;
  CHECK(drmSyncobjWait(fd, &so, 1, abs_timeout_ms(5000), 0, nullptr) == 0);
  out = {};
  REQUIRE(wait_fence(fd, fence, false, abs_timeout_ms(5000), &out) == 0);
  CHECK(out.status == 1);
  CHECK(out.first_signaled == 0);
  CHECK(wait_cs(fd, s.ctx, AMDGPU_HW_IP_DMA, 0, ~uint64_t{0}, 0) == 0);
  // A sequence number not yet emitted is an error.
  CHECK(wait_cs(fd, s.ctx, AMDGPU_HW_IP_DMA, 0, seq + 10, 0) == -EINVAL);
}
