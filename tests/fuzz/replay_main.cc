// The fuzz targets' replay driver (docs/fuzzing.md). In the normal build each target is linked
// with this main() instead of libFuzzer's, and CTest runs it over the target's committed corpus
// (tests/fuzz/corpus/<target>/), so that `make test` replays every seed and regression input, and
// `make test-sanitize` replays them under ASan + UBSan.
//
//   <target>_fuzzer PATH...   each PATH a file (one input) or a folder (each regular file in it,
//                             not recursively, one input, in name order)
//
// Calls LLVMFuzzerInitialize once when the target defines one, then LLVMFuzzerTestOneInput once
// per input, each from a heap buffer of its exact size (as libFuzzer does, so that ASan sees a
// read past the end). Each input is named on stderr before it runs, so that a crash, a sanitizer
// report or a target's failed check (which aborts) is followed by nothing but its report: the
// last "replay: running" line names the input. Exit status: 0 when every input ran; 1 when a
// path is missing or unreadable or no input was found at all (so that an empty or missing
// corpus cannot pass by running nothing); a crash ends the process where it happens.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Optional in a target: weak, so that it is null where the target does not define it.
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

namespace fs = std::filesystem;

// The inputs `path` names: itself (a file), or the regular files in it (a folder), sorted.
// False (with a message) when it is neither.
bool CollectInputs(const fs::path& path, std::vector<fs::path>* inputs) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    inputs->push_back(path);
    return true;
  }
  if (!fs::is_directory(path, ec)) {
    std::fprintf(stderr, "replay: %s is neither a file nor a folder\n", path.c_str());
    return false;
  }
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(path, ec)) {
    if (entry.is_regular_file(ec)) files.push_back(entry.path());
  }
  if (ec) {
    std::fprintf(stderr, "replay: cannot list %s: %s\n", path.c_str(), ec.message().c_str());
    return false;
  }
  std::sort(files.begin(), files.end());
  inputs->insert(inputs->end(), files.begin(), files.end());
  return true;
}

bool ReadInput(const fs::path& path, std::vector<char>* bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  bytes->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PATH... (files, or folders of files, one input each)\n",
                 argv[0]);
    return 1;
  }
  std::vector<fs::path> inputs;
  bool ok = true;
  for (int i = 1; i < argc; ++i) ok = CollectInputs(argv[i], &inputs) && ok;
  if (!ok) return 1;
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no input in the paths given: an empty corpus replays nothing\n");
    return 1;
  }
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<char> bytes;
  for (const fs::path& input : inputs) {
    if (!ReadInput(input, &bytes)) {
      std::fprintf(stderr, "replay: cannot read %s\n", input.c_str());
      return 1;
    }
    std::fprintf(stderr, "replay: running %s (%zu bytes)\n", input.c_str(), bytes.size());
    std::fflush(stderr);
    const auto data = std::make_unique<uint8_t[]>(bytes.size());
    std::copy(bytes.begin(), bytes.end(), data.get());
    LLVMFuzzerTestOneInput(data.get(), bytes.size());
  }
  std::fprintf(stderr, "replay: %zu input(s) ran\n", inputs.size());
  return 0;
}
