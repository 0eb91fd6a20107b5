// The context's shared page (blob_id 0): a sealed memfd the host maps and hands to the VMM as an
// SHM blob. Sealed against shrinking so the guest side can never make the host's mapping fault.
#pragma once

#include <memory>

#include "context/shmem_view.h"
#include "util/mapping.h"
#include "util/unique_fd.h"

namespace rvgl {

class SharedPage {
 public:
  static std::unique_ptr<SharedPage> create(int *err);

  ShmemView &view() { return view_; }
  // A new fd on the page for the VMM (owned by the caller).
  UniqueFd dup_fd() const;

 private:
  SharedPage() = default;
  UniqueFd fd_;
  Mapping map_;
  ShmemView view_;
};

}  // namespace rvgl
