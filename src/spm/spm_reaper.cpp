#include "spm/spm_reaper.h"

namespace rvgl {

SpmReaper &SpmReaper::instance() {
  static SpmReaper r;
  return r;
}

SpmReaper::~SpmReaper() {
  drain();
}

void SpmReaper::reap_finished_locked() {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (it->done) {
      it->thread.join();
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
}

void SpmReaper::retire(std::unique_ptr<SpmSession> session, std::function<void()> then) {
  session->detach();
  std::lock_guard lk(mu_);
  reap_finished_locked();
  jobs_.emplace_back();
  Job *job = &jobs_.back();
  SpmSession *raw = session.release();
  job->thread = std::thread([this, job, raw, then = std::move(then)] {
    delete raw;
    if (then) then();
    std::lock_guard lk(mu_);
    job->done = true;
  });
}

void SpmReaper::drain() {
  std::list<Job> all;
  {
    std::lock_guard lk(mu_);
    all.swap(jobs_);
  }
  for (auto &j : all)
    j.thread.join();
}

}  // namespace rvgl
