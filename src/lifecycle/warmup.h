// A version's warm-up: the samples a load runs on every instance before the version serves --
// Triton's `model_warmup` from the config, or, without one, Harrier's implicit zero-filled run
// (free dims as 1) -- built from the config and run through the version's scheduler.
//
// Every input of every sample is sized before any is allocated or read, against one budget
// (kMaxWarmupBytes): a config, or a load request's config override, may ask for any shapes,
// files and sample counts. A configured warm-up past the budget fails the load, naming the sample
// and the input; the implicit one is then not run (Warmup::skipped), which the load reports as a
// failed implicit warm-up: a warning, and the model serves.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "harrier/status.h"
#include "harrier/tensor.h"
#include "lifecycle/model_io.h"
#include "repository/model_config.pb.h"
#include "scheduler/model_scheduler.h"

namespace harrier {

// What a warm-up may take in all: every input of every sample together.
inline constexpr int64_t kMaxWarmupBytes = int64_t{1} << 30;

// A warm-up sample: named inputs with their own buffers.
struct WarmupSample {
  std::string name;
  int runs = 1;
  std::vector<Tensor> inputs;
};

// What a version's warm-up runs. The implicit one (no `model_warmup` in the config) is only an
// optimisation, so its failure is a warning; a configured one that fails fails the load, as in
// Triton.
struct Warmup {
  bool implicit = false;
  std::vector<WarmupSample> samples;
  // Why the implicit warm-up was not built (its inputs would take more than a warm-up may);
  // reported as its failure.
  std::string skipped;
};

// The warm-up `config` asks for, its files read from `model_dir`/warmup/. Errors:
// kInvalidArgument naming the sample and the input for a configured warm-up past
// kMaxWarmupBytes (or with a shape that overflows), a file that is missing or shorter than one
// sample.
StatusOr<Warmup> BuildWarmup(const inference::ModelConfig& config, const ModelIO& io,
                             const std::string& model_dir);

// Runs each sample its count of times on every instance of `scheduler`; the inputs pass a
// client's checks first. The first failure, with the sample's name; kUnavailable once `stop`
// (the server stops) or `unload` (an unload of the model was asked for) is set, both checked
// before each run (either may be null).
Status RunWarmup(const std::vector<WarmupSample>& samples, const ModelIO& io,
                 std::string_view model_name, ModelScheduler& scheduler,
                 const std::atomic<bool>* stop = nullptr,
                 const std::atomic<bool>* unload = nullptr);

}  // namespace harrier
