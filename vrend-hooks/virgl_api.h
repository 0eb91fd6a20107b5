// virglrenderer's C API as this library exports it: Debian's 0.10.4 header with the unstable
// APIs (context fences, import_blob, the version 4 callbacks), plus the 1.x additions.
// Every file of ours includes virglrenderer.h through here, so all see the same declarations.
#pragma once

#ifndef VIRGL_RENDERER_UNSTABLE_APIS
#define VIRGL_RENDERER_UNSTABLE_APIS 1
#endif
// 0.10.4's header has no extern "C" guard of its own.
#ifdef __cplusplus
#include <sys/uio.h>
extern "C" {
#endif
#include <virgl/virglrenderer.h>
#ifdef __cplusplus
}
#endif

#include "virgl_abi.h"
