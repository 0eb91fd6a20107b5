// Runs a harness over files without libFuzzer: how `meson test` replays the seed corpora and every
// crash ever found (fuzz/regressions/) in ordinary builds. Arguments: files or directories.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

namespace {

void collect(const std::string &path, std::vector<std::string> *out) {
  struct stat st;
  if (stat(path.c_str(), &st)) return;
  if (!S_ISDIR(st.st_mode)) {
    out->push_back(path);
    return;
  }
  DIR *d = opendir(path.c_str());
  if (!d) return;
  while (dirent *e = readdir(d))
    if (e->d_name[0] != '.') collect(path + "/" + e->d_name, out);
  closedir(d);
}

}  // namespace

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i)
    collect(argv[i], &files);
  std::sort(files.begin(), files.end());
  for (const auto &f : files) {
    std::ifstream in(f, std::ios::binary);
    std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(data.data(), data.size());
  }
  std::printf("replayed %zu inputs\n", files.size());
  return files.empty() ? 1 : 0;
}
