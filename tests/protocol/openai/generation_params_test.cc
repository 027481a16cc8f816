#include "protocol/openai/generation_params.h"

#include <gtest/gtest.h>

namespace harrier::openai {
namespace {

TEST(FillGenerationRequestTest, CopiesTheSamplingFieldsAndGivesEachChoiceItsSeed) {
  GenerationParams p;
  p.max_tokens = 9;
  p.stop = {"\n"};
  p.temperature = 0.5f;
  p.top_k = 7;
  p.top_p = 0.8f;
  p.min_p = 0.1f;
  p.repetition_penalty = 1.2f;
  p.frequency_penalty = -0.5f;
  p.presence_penalty = 0.25f;
  p.logprobs = true;
  p.top_logprobs = 3;
  p.priority = 2;
  p.seed = 41;
  GenerationRequest r;
  FillGenerationRequest(p, 1, &r);
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 7);
  EXPECT_EQ(r.sampling.top_p, 0.8f);
  EXPECT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_EQ(r.sampling.repeat_penalty, 1.2f);
  EXPECT_EQ(r.sampling.frequency_penalty, -0.5f);
  EXPECT_EQ(r.sampling.presence_penalty, 0.25f);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_EQ(r.priority, 2u);
  EXPECT_EQ(r.sampling.seed, 42u);
  p.seed.reset();
  GenerationRequest random;
  FillGenerationRequest(p, 1, &random);
  EXPECT_FALSE(random.sampling.seed.has_value());
}

// 4294967295 is llama.cpp's "pick a random seed": a choice's seed wraps below it, so that
// every choice of a seeded request stays reproducible.
TEST(FillGenerationRequestTest, AChoicesSeedNeverBecomesLlamaCppsRandomOne) {
  GenerationParams p;
  p.seed = 4294967293u;
  std::vector<uint32_t> seeds;
  for (int choice = 0; choice < 4; ++choice) {
    GenerationRequest r;
    FillGenerationRequest(p, choice, &r);
    seeds.push_back(*r.sampling.seed);
  }
  EXPECT_EQ(seeds, (std::vector<uint32_t>{4294967293u, 4294967294u, 0u, 1u}));
}

}  // namespace
}  // namespace harrier::openai
