/*
 * Preloaded into the stock virgl_test_server for the guest transport's end-to-end test: the
 * server always asks virglrenderer for EGL, which cannot start without a render node, and then
 * drops every client. This replaces its init flags with NO_VIRGL | VENUS, keeping the two vtest
 * itself needs (THREAD_SYNC, USE_EXTERNAL_BLOB; vtest_renderer.c vtest_init_renderer), so the
 * server runs and a venus context stands in for a real context type.
 */
#define VIRGL_RENDERER_UNSTABLE_APIS
#include <dlfcn.h>
#include <stddef.h>
#include <virgl/virglrenderer.h>

typedef int (*init_fn)(void *, int, struct virgl_renderer_callbacks *);

int virgl_renderer_init(void *cookie, int flags, struct virgl_renderer_callbacks *cb) {
  init_fn real = (init_fn)dlsym(RTLD_NEXT, "virgl_renderer_init");
  if (!real) return -1;
  (void)flags;
  return real(cookie,
              VIRGL_RENDERER_NO_VIRGL | VIRGL_RENDERER_VENUS | VIRGL_RENDERER_THREAD_SYNC |
                  VIRGL_RENDERER_USE_EXTERNAL_BLOB,
              cb);
}
