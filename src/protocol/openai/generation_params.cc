#include "protocol/openai/generation_params.h"

#include <limits>

namespace harrier::openai {

void FillGenerationRequest(const GenerationParams& p, int choice, GenerationRequest* r) {
  r->max_tokens = p.max_tokens;
  r->stop = p.stop;
  r->sampling.temperature = p.temperature;
  r->sampling.top_k = p.top_k;
  r->sampling.top_p = p.top_p;
  r->sampling.min_p = p.min_p;
  r->sampling.repeat_penalty = p.repetition_penalty;
  r->sampling.frequency_penalty = p.frequency_penalty;
  r->sampling.presence_penalty = p.presence_penalty;
  if (p.seed) {
    constexpr uint64_t kSeeds = std::numeric_limits<uint32_t>::max();  // 0 ... 4294967294
    r->sampling.seed =
        static_cast<uint32_t>((uint64_t{*p.seed} + static_cast<uint64_t>(choice)) % kSeeds);
  }
  r->logprobs = p.logprobs;
  r->top_logprobs = p.top_logprobs;
  r->priority = static_cast<uint64_t>(p.priority);
}

}  // namespace harrier::openai
