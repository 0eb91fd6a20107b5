#include <fmt/format.h>

#include <cerrno>

#include "capset_source.h"
#include "rvgl_capset.h"
#include "virgl_api.h"

namespace rvgl::info {

namespace {

// The smallest VMM: no fences expected, and no node of its own to offer (get_drm_fd -1 leaves
// the choice to the hooks' configuration, as vtest without --rendernode does).
class RendererSession {
 public:
  RendererSession() {
    cbs_.version = 2;
    cbs_.write_fence = [](void *, uint32_t) {};
    cbs_.get_drm_fd = [](void *) { return -1; };
    result_ = virgl_renderer_init(this, VIRGL_RENDERER_NO_VIRGL, &cbs_);
  }
  ~RendererSession() {
    if (result_ == 0) virgl_renderer_cleanup(this);
  }
  RendererSession(const RendererSession &) = delete;
  RendererSession &operator=(const RendererSession &) = delete;
  int result() const { return result_; }

 private:
  virgl_renderer_callbacks cbs_{};
  int result_ = -1;
};

}  // namespace

guest::Result<LoadedCapset> load_capset_in_process(uint32_t capset_id) {
  RendererSession renderer;
  if (renderer.result() != 0)
    return guest::make_error(renderer.result() > 0 ? -renderer.result() : renderer.result(),
                             fmt::format("virgl_renderer_init failed ({})", renderer.result()));
  uint32_t max_ver = 0, max_size = 0;
  virgl_renderer_get_cap_set(capset_id, &max_ver, &max_size);
  if (max_ver == 0 || max_size == 0)
    return guest::make_error(-ENOENT, fmt::format("capset {} is not offered (no device answered: "
                                                  "is an amdgpu render node, or the emulator, "
                                                  "present? RVGL_RENDER_NODE picks one)",
                                                  capset_id));
  std::vector<uint8_t> bytes(max_size);
  virgl_renderer_fill_caps(capset_id, max_ver, bytes.data());
  auto parsed = guest::parse_capset(bytes);
  if (!parsed) return parsed.error();
  LoadedCapset out;
  out.capset = *parsed;
  out.origin.source = "in-process";
  out.origin.capset_id = capset_id;
  out.origin.capset_version = max_ver;
  out.origin.capset_size = max_size;
  out.bytes = std::move(bytes);
  return out;
}

}  // namespace rvgl::info
