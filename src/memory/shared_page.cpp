#include "memory/shared_page.h"

#include <fcntl.h>
#include <sys/mman.h>

#include <cerrno>

#include "rocm_virgl_protocol.h"

namespace rvgl {

std::unique_ptr<SharedPage> SharedPage::create(int *err) {
  std::unique_ptr<SharedPage> p(new SharedPage());
  p->fd_.reset(memfd_create("rocm-virgl-shmem", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!p->fd_ || ftruncate(p->fd_.get(), RVGL_SHMEM_SIZE) ||
      fcntl(p->fd_.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
    *err = -errno;
    return nullptr;
  }
  p->map_ = Mapping::map_shared(p->fd_.get(), RVGL_SHMEM_SIZE, PROT_READ | PROT_WRITE);
  if (!p->map_.valid()) {
    *err = -errno;
    return nullptr;
  }
  p->view_ = ShmemView(p->map_.get(), RVGL_SHMEM_SIZE);
  p->view_.init_header();
  *err = 0;
  return p;
}

UniqueFd SharedPage::dup_fd() const {
  return UniqueFd(fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0));
}

}  // namespace rvgl
