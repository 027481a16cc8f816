#include "backends/llamacpp/llama_sampling.h"

#include <cmath>
#include <string>

namespace harrier {
namespace {

Status OutOfRange(const char* name, const std::string& value, const char* range) {
  return InvalidArgument(std::string("sampling parameter ") + name + " = " + value +
                         " is out of range: " + range);
}

}  // namespace

Status ValidateSamplingParams(const SamplingParams& p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0) {
    return OutOfRange("temperature", std::to_string(p.temperature), "must be >= 0");
  }
  if (p.top_k < 0) return OutOfRange("top_k", std::to_string(p.top_k), "must be >= 0 (0 = off)");
  // 0 (top_p) and 1 (min_p) are OpenAI's and llama.cpp's too: only the likeliest token stays.
  if (!(p.top_p >= 0 && p.top_p <= 1)) {
    return OutOfRange("top_p", std::to_string(p.top_p), "must be in [0, 1] (1 = off)");
  }
  if (!(p.min_p >= 0 && p.min_p <= 1)) {
    return OutOfRange("min_p", std::to_string(p.min_p), "must be in [0, 1] (0 = off)");
  }
  if (!std::isfinite(p.repeat_penalty) || p.repeat_penalty <= 0) {
    return OutOfRange("repeat_penalty", std::to_string(p.repeat_penalty), "must be > 0 (1 = off)");
  }
  if (!std::isfinite(p.frequency_penalty)) {
    return OutOfRange("frequency_penalty", std::to_string(p.frequency_penalty),
                      "must be finite (0 = off)");
  }
  if (!std::isfinite(p.presence_penalty)) {
    return OutOfRange("presence_penalty", std::to_string(p.presence_penalty),
                      "must be finite (0 = off)");
  }
  if (p.repeat_last_n < -1) {
    return OutOfRange("repeat_last_n", std::to_string(p.repeat_last_n),
                      "must be >= -1 (-1 = the whole context, 0 = off)");
  }
  return Status::Ok();
}

SamplerChain MakeSamplerChain(const SamplingParams& p, int n_vocab, int context_size) {
  llama_sampler_chain_params chain_params = llama_sampler_chain_default_params();
  chain_params.no_perf = true;
  SamplerChain chain(llama_sampler_chain_init(chain_params));
  const int last_n = p.repeat_last_n == -1 ? context_size : p.repeat_last_n;
  const bool penalised =
      p.repeat_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
  if (penalised && last_n > 0) {
    llama_sampler_chain_add(chain.get(),
                            llama_sampler_init_penalties(n_vocab, last_n, p.repeat_penalty,
                                                         p.frequency_penalty, p.presence_penalty));
  }
  // Below kGreedyTemperature the logits divided by it pass a float's range (probe 78: 1e-40 made
  // them infinite, and a fixed, non-greedy text came out whatever the seed); the limit of
  // sampling as the temperature goes to 0 is greedy decoding, so that is what it is.
  if (p.temperature < kGreedyTemperature) {
    llama_sampler_chain_add(chain.get(), llama_sampler_init_greedy());
    return chain;
  }
  if (p.top_k > 0) llama_sampler_chain_add(chain.get(), llama_sampler_init_top_k(p.top_k));
  if (p.top_p < 1.0f) {
    llama_sampler_chain_add(chain.get(), llama_sampler_init_top_p(p.top_p, /*min_keep=*/1));
  }
  if (p.min_p > 0.0f) {
    llama_sampler_chain_add(chain.get(), llama_sampler_init_min_p(p.min_p, /*min_keep=*/1));
  }
  llama_sampler_chain_add(chain.get(), llama_sampler_init_temp(p.temperature));
  llama_sampler_chain_add(chain.get(),
                          llama_sampler_init_dist(p.seed.value_or(LLAMA_DEFAULT_SEED)));
  return chain;
}

}  // namespace harrier
