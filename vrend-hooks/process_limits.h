// Per-process limits on our contexts (issue 13, point 6): a guest that keeps creating contexts
// is refused before the VMM runs out of file descriptors or threads.
#pragma once

#include <cstdint>

namespace rvgl::hooks {

// RVGL_MAX_CONTEXTS: ROCM contexts alive at once in this VMM process (every guest together).
constexpr uint32_t kDefaultMaxContexts = 128;
uint32_t max_contexts_from_env();

// File descriptors this process may still open (RLIMIT_NOFILE minus those open), or -1 when
// that cannot be told (no /proc). Costs a directory read: context creation only.
int free_fds();

// Descriptors a new context must leave to the VMM: a quarter of the limit, at most 64. A
// context needs a few of its own (device, eventfd, shared page), the VMM the rest.
int fd_reserve();

// Whether n more descriptors of ours still leave the VMM its reserve: the lowest free descriptor
// (the one the next open gets) plus n - 1 is below the limit minus fd_reserve(). Three system
// calls, for each blob that keeps an fd and each queue. Descriptors closed below open ones leave
// holes that make the answer generous, never strict; no /proc needed.
bool descriptor_left_for_us(int n = 1);

}  // namespace rvgl::hooks
