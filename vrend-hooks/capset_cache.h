// The ROCM capset as get_cap_set / fill_caps answer it: probed from the device once and kept,
// since VMMs ask for it repeatedly (QEMU per guest GET_CAPSET_INFO and GET_CAPSET).
#pragma once

#include <mutex>
#include <optional>

#include "context/config.h"
#include "rocm_virgl_protocol.h"

namespace rvgl::hooks {

class CapsetCache {
 public:
  // The capset, probing the configured device on first use; nullopt while no device answers
  // (a failed probe is retried next time: the device may appear later).
  std::optional<rvgl_capset> get(const Config &cfg);
  // Forget the cached value (the configuration changed).
  void clear();

 private:
  std::mutex mu_;
  std::optional<rvgl_capset> cached_;
};

}  // namespace rvgl::hooks
