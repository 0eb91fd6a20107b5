#include "core/emulator.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "core/counters.h"
#include "core/device_file.h"
#include "core/runtime_knobs.h"
#include "sync/fence.h"

namespace rvgl::emu {

namespace fast {
Emulator *g_instance;
uint8_t g_fd_marks[kMarkedFds];
uint32_t g_big_fds;
uint32_t g_dri_dirs;
}  // namespace fast

namespace {
std::mutex g_create_mu;
}  // namespace

Counters &counters() {
  static Counters *c = new Counters;
  return *c;
}

RuntimeKnobs &knobs() {
  static RuntimeKnobs *k = new RuntimeKnobs;
  return *k;
}

Emulator *Emulator::peek() {
  return fast::instance();
}

Emulator &Emulator::get() {
  if (Emulator *e = peek()) return *e;
  std::lock_guard lk(g_create_mu);
  if (Emulator *e = peek()) return *e;
  auto *e = new Emulator;
  __atomic_store_n(&fast::g_instance, e, __ATOMIC_RELEASE);
  pthread_atfork(&Emulator::fork_prepare, &Emulator::fork_parent, &Emulator::fork_child);
  return *e;
}

Emulator::Emulator() : cfg_(config_from_environment()) {
  knobs().load(cfg_);
  faults_.set_rules(cfg_.fail);
  build_devices_locked();
}

void Emulator::build_devices_locked() {
  for (auto &d : devices_)
    d->stop_rings();
  devices_.clear();
  for (uint32_t i = 0; i < cfg_.devices; ++i)
    devices_.push_back(std::make_unique<Device>(static_cast<int>(i), cfg_));
}

FakeTree *Emulator::tree_locked() {
  if (!tree_) tree_ = FakeTree::create(cfg_);
  return tree_.get();
}

Device *Emulator::device(int index) {
  if (index < 0 || static_cast<size_t>(index) >= devices_.size()) return nullptr;
  return devices_[static_cast<size_t>(index)].get();
}

std::shared_ptr<DeviceFile> Emulator::device_file_locked(int fd) {
  auto f = fds_.get(fd);
  if (!f || f->kind() != OpenFile::Kind::Device) return nullptr;
  return std::static_pointer_cast<DeviceFile>(f);
}

int Emulator::set_knob_locked(std::string_view name, std::string_view value) {
  Config next = cfg_;
  if (int r = apply_knob(next, name, value)) return r;
  if (knob_is_structural(name)) {
    if (fds_.size() != 0) return -EBUSY;
    cfg_ = std::move(next);
    tree_.reset();
    build_devices_locked();
  } else {
    cfg_ = std::move(next);
  }
  knobs().load(cfg_);
  if (name == "RVGL_EMU_FAIL") faults_.set_rules(cfg_.fail);
  if (name == "RVGL_EMU_VM_FAULT_STOP" && tree_ && !tree_->write_module_parameters(cfg_))
    return errno ? -errno : -EIO;
  return 0;
}

// fork(): quiesce every lock a child could need, so none is held by a thread the child lacks.
void Emulator::lock_for_fork() {
  mu_.lock();
  fork_locked_.clear();
  fds_.for_each([&](int, const std::shared_ptr<OpenFile> &f) {
    if (f->kind() != OpenFile::Kind::Device) return;
    auto *df = static_cast<DeviceFile *>(f.get());
    fork_locked_.push_back(&df->vm->fork_lock());
    fork_locked_.push_back(&df->syncobjs.mutex());
    fork_locked_.push_back(&df->contexts.mutex());
    df->userqs.for_each([&](uint32_t, const std::shared_ptr<UserQueue> &q) {
      fork_locked_.push_back(&q->fork_lock());
    });
  });
  for (auto &d : devices_)
    fork_locked_.push_back(&d->spm().fork_lock());
  fork_locked_.push_back(&faults_.fork_lock());
  fork_locked_.push_back(&fds_.fork_lock());
  // A VM may be reachable from several fds (dup): lock each once.
  std::vector<std::mutex *> unique;
  for (auto *m : fork_locked_)
    if (std::find(unique.begin(), unique.end(), m) == unique.end()) unique.push_back(m);
  fork_locked_.swap(unique);
  for (auto *m : fork_locked_)
    m->lock();
  FenceDomain::mutex().lock();
}

void Emulator::unlock_after_fork() {
  FenceDomain::mutex().unlock();
  for (auto it = fork_locked_.rbegin(); it != fork_locked_.rend(); ++it)
    (*it)->unlock();
  fork_locked_.clear();
  mu_.unlock();
}

void Emulator::fork_prepare() {
  if (Emulator *e = peek()) e->lock_for_fork();
}

void Emulator::fork_parent() {
  if (Emulator *e = peek()) e->unlock_after_fork();
}

void Emulator::fork_child() {
  Emulator *e = peek();
  if (!e) return;
  FenceDomain::after_fork_child();  // before anything can wake a sleeper of the parent
  e->unlock_after_fork();
  // No emulator thread exists in the child: forget them, cancel what they would have run.
  std::lock_guard lk(e->mu_);
  e->fds_.for_each([&](int, const std::shared_ptr<OpenFile> &f) {
    if (f->kind() != OpenFile::Kind::Device) return;
    auto *df = static_cast<DeviceFile *>(f.get());
    df->userqs.for_each(
        [](uint32_t, const std::shared_ptr<UserQueue> &q) { q->forget_after_fork(); });
    df->vm->after_fork_child();     // after its user queues: none reads the VM any more
    df->ctx_mgr_held.store(false);  // a FREE_CTX that drained in the parent does not exist here
  });
  for (auto &d : e->devices_)
    d->forget_after_fork();
}

}  // namespace rvgl::emu
