// A request's SamplingParams as a llama.cpp sampler chain, and the checks on them.
// Internal to the llama.cpp backend (includes llama.h).
#pragma once

#include <llama.h>

#include <memory>

#include "harrier/generation.h"
#include "harrier/status.h"

namespace harrier {

// kInvalidArgument naming the first parameter out of range: temperature >= 0, top_k >= 0
// (0: off), top_p in (0, 1] (1: off), min_p in [0, 1) (0: off), repeat_penalty > 0 (1: off),
// frequency_penalty and presence_penalty finite (0: off), repeat_last_n >= -1 (-1: the whole
// context, 0: off).
Status ValidateSamplingParams(const SamplingParams& params);

// Temperatures below this are greedy decoding: dividing logits by less overflows a float.
inline constexpr float kGreedyTemperature = 1e-6f;

struct SamplerChainDeleter {
  void operator()(llama_sampler* chain) const { llama_sampler_free(chain); }
};
using SamplerChain = std::unique_ptr<llama_sampler, SamplerChainDeleter>;

// The chain, in llama.cpp's usual order: the penalties (one llama.cpp sampler for the
// repetition, frequency and presence penalties; when any is on), then either greedy
// (temperature below kGreedyTemperature) or top-k, top-p, min-p (each when on), temperature and
// a seeded draw.
// `context_size` is what repeat_last_n = -1 stands for.
// REQUIRES: ValidateSamplingParams(params) is OK.
SamplerChain MakeSamplerChain(const SamplingParams& params, int n_vocab, int context_size);

}  // namespace harrier
