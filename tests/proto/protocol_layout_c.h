#pragma once
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
struct rvgl_c_layout {
  const char *name;
  size_t size;
};
const struct rvgl_c_layout *rvgl_c_layouts(unsigned *count);
unsigned rvgl_c_stdc_version(void);
#ifdef __cplusplus
}
#endif
