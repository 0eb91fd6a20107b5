#include "spm/spm_session.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

namespace rvgl {

int SpmSession::kernel_op(uint32_t op, rvgl_drm_amdgpu_spm_args *spm) {
  rvgl_drm_amdgpu_profiler_args args{};
  args.op = RVGL_AMDGPU_PROFILER_OP_SPM;
  args.data.spm = *spm;
  args.data.spm.op = op;
  int r = dev_->profiler(&args);
  *spm = args.data.spm;
  return r;
}

int SpmSession::create(std::shared_ptr<AmdgpuDevice> dev, uint32_t xcp, uint32_t ring_idx,
                       std::shared_ptr<SpmCallbacks> callbacks, std::unique_ptr<SpmSession> *out) {
  std::unique_ptr<SpmSession> s(new SpmSession(dev, xcp, ring_idx, std::move(callbacks)));
  int err;
  s->timeline_ = SyncTimeline::create(dev, &err);
  if (!s->timeline_) return err;
  rvgl_drm_amdgpu_spm_args spm{};
  if ((err = s->kernel_op(RVGL_AMDGPU_SPM_OP_ACQUIRE, &spm))) return err;
  s->acquired_ = true;
  try {
    s->worker_ = std::thread([p = s.get()] { p->run(); });
  } catch (const std::system_error &e) {
    // No thread: an error for this request, and the SPM released again (the destructor) so the
    // caller can give its arbiter entry back. Never an exception through the decoder.
    return e.code().value() ? -e.code().value() : -EAGAIN;
  }
  *out = std::move(s);
  return 0;
}

std::shared_ptr<Mapping> SpmSession::make_bounce(uint32_t size, Charge charge) {
  void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) return nullptr;
  struct Charged {
    Mapping map;
    Charge charge;
  };
  auto owner = std::make_shared<Charged>(Charged{Mapping(p, size), std::move(charge)});
  return std::shared_ptr<Mapping>(owner, &owner->map);
}

void SpmSession::deliver(const Destination &d) {
  if (!d.bounce || !d.object || d.size == 0) return;
  // The kernel's split (seed 000, as the emulator's spm_unit): size / slices rounded down to 32
  // bytes, each slice a 32-byte header then bytes_copied bytes of samples.
  const uint32_t slices = std::max<uint32_t>(1, d.slices);
  const uint64_t slice = (d.size / slices) & ~uint64_t{31};
  const auto *base = d.bounce->as<const uint8_t>();
  for (uint32_t x = 0; x < slices && slice > sizeof(rvgl_drm_amdgpu_spm_buffer_header); ++x) {
    rvgl_drm_amdgpu_spm_buffer_header h;
    std::memcpy(&h, base + x * slice, sizeof(h));
    const uint64_t data = std::min<uint64_t>(h.bytes_copied, slice - sizeof(h));
    // -ENOENT once revoked: the guest's pages are not ours to write any more.
    if (d.object->write_guest(d.guest_offset + x * slice, base + x * slice, sizeof(h) + data) != 0)
      return;
  }
}

SpmSession::~SpmSession() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  int released = 0;
  if (acquired_) {
    rvgl_drm_amdgpu_spm_args spm{};
    for (int attempt = 0; attempt < 3; ++attempt)
      if ((released = kernel_op(RVGL_AMDGPU_SPM_OP_RELEASE, &spm)) == 0) break;
  }
  if (worker_.joinable()) worker_.join();
  // A kernel that did not let go of the SPM may still write into the last destination it was
  // given: that memory stays until the device file closes (the kernel's release of the file
  // stops the stream), never freed for reuse under it. The mapping only, not the object, which
  // holds the device itself.
  if (released != 0) {
    current_room_.keep(std::move(current_.bounce));
    current_room_.keep(std::move(current_.host_mapping));
  }
}

bool SpmSession::release_if_idle() {
  {
    std::lock_guard lk(mu_);
    // A job stays queued while the kernel runs it (run()): empty means the worker is not in the
    // kernel, and only this thread could queue more.
    if (!acquired_ || stop_ || !jobs_.empty()) return false;
    stop_ = true;
  }
  cv_.notify_all();
  rvgl_drm_amdgpu_spm_args spm{};
  if (kernel_op(RVGL_AMDGPU_SPM_OP_RELEASE, &spm) != 0) return false;
  acquired_ = false;  // the kernel stopped the stream: the last destination is free
  return true;
}

int SpmSession::set_dest(Destination dst, uint32_t timeout_ms, uint32_t seqno, uint32_t rsp_off) {
  {
    std::lock_guard lk(mu_);
    if (jobs_.size() >= kMaxPending || stop_) return -EBUSY;
    jobs_.push_back(Job{std::move(dst), timeout_ms, seqno, rsp_off});
    ++accepted_;
  }
  cv_.notify_all();
  return 0;
}

void SpmSession::run() {
  for (;;) {
    Job job;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return !jobs_.empty() || stop_; });
      if (stop_ && jobs_.empty()) return;
      job = jobs_.front();  // stays queued while it runs: counts against kMaxPending
    }
    rvgl_rsp_spm_set_dest rsp{};
    rsp.hdr.seqno = job.seqno;
    rvgl_drm_amdgpu_spm_args spm{};
    spm.dest_buf = reinterpret_cast<uintptr_t>(job.dst.host);
    spm.buf_size = job.dst.size;
    spm.timeout = job.timeout_ms;
    bool stopping;
    {
      std::lock_guard lk(mu_);
      stopping = stop_;
    }
    // Room to keep the new destination should the kernel fail part way (below), or not let go
    // of it at the end (the destructor), made before the kernel may need it: nothing may be
    // freed that it could still write into.
    KeptRoom room;
    if (job.dst.host) room = KeptRoom::make(dev_, 2);
    const bool have_room = job.dst.host == nullptr || room;
    const int kernel_result = stopping     ? -ECANCELED
                              : !have_room ? -ENOMEM
                                           : kernel_op(RVGL_AMDGPU_SPM_OP_SET_DEST_BUF, &spm);
    rsp.hdr.result = kernel_result;
    if (rsp.hdr.result == 0) {
      rsp.bytes_copied = spm.bytes_copied;
      rsp.has_data_loss = spm.has_data_loss;
      rsp.timeout_left_ms = spm.timeout;
    }
    Destination retired;
    {
      std::lock_guard lk(mu_);
      // Released between the look above and the call: the kernel refuses a SET_DEST of an SPM no
      // longer held (-EINVAL). For the guest it is a SET_DEST its own release cancelled.
      if (rsp.hdr.result != 0 && stop_) rsp.hdr.result = -ECANCELED;
      if (rsp.hdr.result == 0) {
        // The kernel has let go of the previous destination: it may be unmapped now, and its
        // places go back.
        retired = std::move(current_);
        current_ = std::move(job.dst);
        current_room_ = std::move(room);
      }
    }
    // The kernel has retired it: hand its contents to the guest before the response says so.
    deliver(retired);
    retired = {};
    // amdgpu_set_dest_buffer() takes the new destination XCC by XCC, each after writing the
    // header of the one it retires; a header it cannot write (-EFAULT, spm_update_dest_info())
    // ends the loop with the new destination already streaming on the XCCs before. It stays
    // until the file closes, never freed under the kernel (room was made above).
    if (kernel_result == -EFAULT && job.dst.host) {
      room.keep(std::move(job.dst.bounce));
      room.keep(std::move(job.dst.host_mapping));
    }
    job.dst = {};
    room = {};
    // Counted done only now: whoever sees the count sees the memory it no longer needs let go.
    uint64_t point;
    {
      std::lock_guard lk(mu_);
      data_loss_total_ += rsp.has_data_loss;
      jobs_.pop_front();
      point = ++completed_;
    }
    // Through the shared link, under its lock, never a copy of the callbacks taken earlier: a
    // copy could outlive the owner's cut() and call into a context that is gone (found by
    // fuzz-protocol). A released session still reports while its context lives.
    callbacks_->finished(xcp_, job.rsp_off, rsp, *timeline_, point);
  }
}

uint64_t SpmSession::accepted() const {
  std::lock_guard lk(mu_);
  return accepted_;
}

uint64_t SpmSession::completed() const {
  std::lock_guard lk(mu_);
  return completed_;
}

uint32_t SpmSession::data_loss_total() const {
  std::lock_guard lk(mu_);
  return data_loss_total_;
}

}  // namespace rvgl
