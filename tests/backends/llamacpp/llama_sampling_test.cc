#include "backends/llamacpp/llama_sampling.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace harrier {
namespace {

struct ParamsCase {
  const char* name;
  SamplingParams params;
  const char* error;  // nullptr: valid
};

SamplingParams With(void (*edit)(SamplingParams&)) {
  SamplingParams p;
  edit(p);
  return p;
}

class SamplingParamsTable : public ::testing::TestWithParam<ParamsCase> {};

TEST_P(SamplingParamsTable, Validates) {
  const ParamsCase& c = GetParam();
  const Status status = ValidateSamplingParams(c.params);
  if (c.error == nullptr) {
    EXPECT_TRUE(status.ok()) << status.ToString();
  } else {
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), ::testing::HasSubstr(c.error));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SamplingParamsTable,
    ::testing::Values(
        ParamsCase{"defaults", SamplingParams{}, nullptr},
        ParamsCase{"all_on", With([](SamplingParams& p) {
                     p.temperature = 0.7f;
                     p.top_k = 40;
                     p.top_p = 0.9f;
                     p.min_p = 0.05f;
                     p.repeat_penalty = 1.1f;
                     p.repeat_last_n = -1;
                     p.seed = 7;
                   }),
                   nullptr},
        ParamsCase{"negative_temperature", With([](SamplingParams& p) { p.temperature = -0.1f; }),
                   "temperature"},
        ParamsCase{"nan_temperature", With([](SamplingParams& p) { p.temperature = NAN; }),
                   "temperature"},
        ParamsCase{"negative_top_k", With([](SamplingParams& p) { p.top_k = -1; }), "top_k"},
        // OpenAI accepts top_p 0; in llama.cpp it keeps the likeliest token (min_keep 1), as
        // min_p 1 does.
        ParamsCase{"zero_top_p", With([](SamplingParams& p) { p.top_p = 0; }), nullptr},
        ParamsCase{"negative_top_p", With([](SamplingParams& p) { p.top_p = -0.1f; }), "top_p"},
        ParamsCase{"top_p_over_one", With([](SamplingParams& p) { p.top_p = 1.5f; }), "top_p"},
        ParamsCase{"min_p_one", With([](SamplingParams& p) { p.min_p = 1; }), nullptr},
        ParamsCase{"min_p_over_one", With([](SamplingParams& p) { p.min_p = 1.01f; }), "min_p"},
        ParamsCase{"zero_penalty", With([](SamplingParams& p) { p.repeat_penalty = 0; }),
                   "repeat_penalty"},
        ParamsCase{"openai_penalties", With([](SamplingParams& p) {
                     p.frequency_penalty = -2;
                     p.presence_penalty = 2;
                   }),
                   nullptr},
        ParamsCase{"infinite_frequency_penalty",
                   With([](SamplingParams& p) { p.frequency_penalty = INFINITY; }),
                   "frequency_penalty"},
        ParamsCase{"nan_presence_penalty",
                   With([](SamplingParams& p) { p.presence_penalty = NAN; }), "presence_penalty"},
        ParamsCase{"last_n_below_minus_one", With([](SamplingParams& p) { p.repeat_last_n = -2; }),
                   "repeat_last_n"}),
    [](const ::testing::TestParamInfo<ParamsCase>& info) { return std::string(info.param.name); });

TEST(MakeSamplerChain, GreedyIsOneSamplerAndPenaltiesComeFirst) {
  SamplingParams greedy_params;
  greedy_params.temperature = 0;
  SamplerChain greedy = MakeSamplerChain(greedy_params, 100, 64);
  ASSERT_EQ(llama_sampler_chain_n(greedy.get()), 1);
  EXPECT_STREQ(llama_sampler_name(llama_sampler_chain_get(greedy.get(), 0)), "greedy");

  // A temperature too small to divide logits by is greedy too (probe 78: 1e-40, a subnormal
  // float, made them infinite and the text non-greedy); 1e-6 and up sample.
  for (float tiny : {1e-40f, 1e-30f, 9e-7f}) {
    SamplingParams almost_zero;
    almost_zero.temperature = tiny;
    SamplerChain chain = MakeSamplerChain(almost_zero, 100, 64);
    ASSERT_EQ(llama_sampler_chain_n(chain.get()), 1) << tiny;
    EXPECT_STREQ(llama_sampler_name(llama_sampler_chain_get(chain.get(), 0)), "greedy");
  }
  SamplingParams small;
  small.temperature = 1e-6f;
  EXPECT_GT(llama_sampler_chain_n(MakeSamplerChain(small, 100, 64).get()), 1);

  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  p.repeat_penalty = 1.2f;
  SamplerChain chain = MakeSamplerChain(p, 100, 64);
  std::string names;
  for (int i = 0; i < llama_sampler_chain_n(chain.get()); ++i) {
    names += std::string(llama_sampler_name(llama_sampler_chain_get(chain.get(), i))) + " ";
  }
  EXPECT_EQ(names, "penalties top-k top-p min-p temp dist ");

  // OpenAI's penalties alone switch the penalties sampler on.
  SamplingParams openai;
  openai.temperature = 0;
  openai.presence_penalty = 0.5f;
  SamplerChain with_presence = MakeSamplerChain(openai, 100, 64);
  ASSERT_EQ(llama_sampler_chain_n(with_presence.get()), 2);
  EXPECT_STREQ(llama_sampler_name(llama_sampler_chain_get(with_presence.get(), 0)), "penalties");
}

}  // namespace
}  // namespace harrier
