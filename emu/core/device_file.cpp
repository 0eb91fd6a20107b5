#include "core/device_file.h"

#include <atomic>

#include "core/counters.h"
#include "core/device.h"

namespace rvgl::emu {

namespace {
std::atomic<uint64_t> g_next_file_id{1};
}

DeviceFile::DeviceFile(Device &d, bool is_primary)
    : OpenFile(Kind::Device),
      device(d),
      primary(is_primary),
      id(g_next_file_id.fetch_add(1)),
      vm(std::make_shared<GpuVm>()) {
  counters().device_files_open.fetch_add(1, std::memory_order_relaxed);
}

DeviceFile::~DeviceFile() {
  // amdgpu_driver_postclose_kms: user queues go first, then the SPM, contexts, objects.
  userqs.clear();
  device.spm().release_if_owner(id);
  counters().device_files_open.fetch_sub(1, std::memory_order_relaxed);
}

std::shared_ptr<BufferObject> DeviceFile::bo(uint32_t handle) {
  auto *p = bos.find(handle);
  return p ? *p : nullptr;
}

uint32_t DeviceFile::handle_for(std::shared_ptr<BufferObject> b) {
  auto it = bo_handles.find(b.get());
  if (it != bo_handles.end()) return it->second;
  const BufferObject *key = b.get();
  const uint32_t h = bos.insert(std::move(b));
  bo_handles.emplace(key, h);
  return h;
}

bool DeviceFile::close_handle(uint32_t handle) {
  std::shared_ptr<BufferObject> b;
  if (!bos.erase(handle, &b)) return false;
  bo_handles.erase(b.get());
  for (auto it = foreign_imports.begin(); it != foreign_imports.end();)
    it = it->second == handle ? foreign_imports.erase(it) : std::next(it);
  // amdgpu_gem_object_close: the object's bo_va in this VM is removed with all its mappings.
  vm->remove_bo(b.get());
  return true;
}

}  // namespace rvgl::emu
