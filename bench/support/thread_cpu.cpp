#include "thread_cpu.h"

#include <dirent.h>

#include <cstdio>
#include <cstring>

namespace rvgl::bench {

namespace {

bool read_line(const char *path, char *buf, size_t len) {
  std::FILE *f = std::fopen(path, "re");
  if (!f) return false;
  const bool ok = std::fgets(buf, static_cast<int>(len), f) != nullptr;
  std::fclose(f);
  return ok;
}

}  // namespace

ThreadCpu ThreadCpu::now() {
  ThreadCpu t;
  DIR *d = opendir("/proc/self/task");
  if (!d) return t;
  while (const dirent *e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char path[300], comm[32], stat[128];  // d_name is up to 255 bytes
    std::snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat", e->d_name);
    if (!read_line(path, stat, sizeof(stat))) continue;  // the thread has exited
    std::snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
    if (!read_line(path, comm, sizeof(comm))) continue;
    unsigned long long ns = 0, waited = 0, runs = 0;
    if (std::sscanf(stat, "%llu %llu %llu", &ns, &waited, &runs) != 3) continue;
    t.known = true;
    if (std::strncmp(comm, "emu-ring", 8) == 0) {
      t.gpu_ns += ns;
      t.gpu_runs += runs;
    } else if (std::strncmp(comm, "rvgl-completion", 15) == 0) {
      t.engine_ns += ns;
      t.engine_runs += runs;
    } else {
      t.other_runs += runs;
    }
  }
  closedir(d);
  return t;
}

}  // namespace rvgl::bench
