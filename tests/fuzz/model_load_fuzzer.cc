// libFuzzer target: a config.pbtxt as a load carries it out, not only as the parser reads it.
// The input is the file's text, written beside two versions of a model that the fake backend
// (tests/util/fake_backend.h) serves; the ModelRepositoryManager then loads the repository as the
// server does — auto-complete, version policy, the scheduler, its queues and priority levels,
// instance groups and their threads, warm-up — answers one request for the model, and shuts down.
//
// What it finds besides the sanitizers': a config whose every count and size passes validation
// but whose load allocates or spawns without bound (libFuzzer's -malloc_limit_mb and
// -rss_limit_mb, 2 GiB by default, stop at the first allocation past them, and tools/fuzz.sh keeps
// its default timeout); a request whose callback is not called, or called twice; a version left
// LOADING after LoadAll() returned; a shutdown that hangs.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "lifecycle/backend_registry.h"
#include "lifecycle/model_repository_manager.h"
#include "util/fake_backend.h"
#include "util/scheduled_request_builder.h"

namespace {

namespace fs = std::filesystem;
using harrier::ModelRepositoryManager;
using harrier::ModelState;
using harrier::StatusOr;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "model_load_fuzzer: %s\n", what.c_str());
  std::abort();
}

void WriteFile(const fs::path& path, std::string_view content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  if (!out) Fail("cannot write " + path.string());
}

// The repository, made once per process: <tmp>/repo/m/{1,2}/model.onnx, each an identity model
// with one free and one fixed dim, and a warm-up sample file a config may name.
struct Repository {
  fs::path root;
  fs::path config;
  Repository() {
    // $TMPDIR: tools/fuzz.sh points it into build-fuzz, so that a run that aborts on a finding
    // (no destructor runs) leaves its folder there, emptied by the next run, not in /tmp.
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                          "/harrier-model-load-fuzz-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) Fail("mkdtemp failed in " + pattern);
    root = fs::path(pattern) / "repo";
    for (const char* version : {"1", "2"}) {
      fs::create_directories(root / "m" / version);
      WriteFile(root / "m" / version / "model.onnx", "identity FP32 -1 4");
    }
    fs::create_directories(root / "m" / "warmup");
    WriteFile(root / "m" / "warmup" / "INPUT0", std::string(16, '\0'));
    config = root / "m" / "config.pbtxt";
  }
  ~Repository() { fs::remove_all(root.parent_path()); }
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // HARRIER_FUZZ_LOG=info shows what each load did (as the HTTP harness does).
  const char* level = std::getenv("HARRIER_FUZZ_LOG");
  spdlog::set_level(level != nullptr ? spdlog::level::from_str(level) : spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Repository repository;
  static harrier::testing::FakeBackend backend;
  static const harrier::BackendRegistry backends = [] {
    harrier::BackendRegistry r;
    r.AddTensorBackend(&backend);
    return r;
  }();
  WriteFile(repository.config, std::string_view(reinterpret_cast<const char*>(data), size));

  ModelRepositoryManager::Options options;
  options.repository_path = repository.root.string();
  options.backends = &backends;
  options.usable_cores = 2;
  auto created = ModelRepositoryManager::Create(options);
  if (!created.ok()) Fail("the repository was refused: " + created.status().ToString());
  ModelRepositoryManager& manager = **created;
  manager.LoadAll();

  for (const harrier::ModelVersionState& row : manager.Index()) {
    if (row.state == ModelState::kLoading)
      Fail("version " + std::to_string(row.version) + " still LOADING after LoadAll()");
  }
  auto model = manager.Get("m", std::nullopt);
  if (model.ok()) {
    // One request of the shape the model file declares; the config may have reshaped or renamed
    // it, so any answer is fine, but there must be exactly one, in bounded time.
    auto answered = std::make_shared<std::promise<void>>();
    auto calls = std::make_shared<std::atomic<int>>(0);
    (*model)->Infer(harrier::testing::Fp32InferenceRequest({1, 2, 3, 4}, {1, 4}),
                    [answered, calls](StatusOr<harrier::InferenceResponse>) {
                      if (calls->fetch_add(1) == 0) answered->set_value();
                    });
    if (answered->get_future().wait_for(std::chrono::seconds(20)) != std::future_status::ready)
      Fail("a request for a loaded model was not answered in 20 s");
    model = harrier::NotFound("released");  // the handle goes before the shutdown
    manager.Shutdown();
    if (calls->load() != 1) Fail("a request answered " + std::to_string(calls->load()) + " times");
  } else {
    manager.Shutdown();
  }
  return 0;
}
