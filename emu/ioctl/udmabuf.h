// /dev/udmabuf (drivers/dma-buf/udmabuf.c): a dma-buf made of pieces of sealed memfds, with the
// kernel's checks (memfd only, F_SEAL_SHRINK set and F_SEAL_WRITE not, page-aligned items, the
// list_limit item count and size_limit_mb total).
#pragma once

namespace rvgl::emu {

// Each returns the new dma-buf fd or -errno.
int udmabuf_create(void *user_arg);
int udmabuf_create_list(void *user_arg);

}  // namespace rvgl::emu
