// Builders for scheduler tests: ScheduledRequests with one FP32 input INPUT0 whose values the
// test chooses, so that outputs can be checked against each request's own input.
#pragma once

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/scheduled_request.h"

namespace harrier::testing {

// An FP32 INPUT0 of shape `shape` holding `values` (owned by the request's body).
inline std::unique_ptr<InferenceRequest> Fp32InferenceRequest(const std::vector<float>& values,
                                                              Shape shape) {
  auto r = std::make_unique<InferenceRequest>();
  auto body = std::make_shared<std::string>(reinterpret_cast<const char*>(values.data()),
                                            values.size() * sizeof(float));
  Tensor t;
  t.name = "INPUT0";
  t.dtype = DataType::kFp32;
  t.shape = std::move(shape);
  t.data = reinterpret_cast<const std::byte*>(body->data());
  t.size_bytes = body->size();
  r->inputs.push_back(t);
  r->body = body;
  r->allow_inline = InlineAllowance::kAlways;  // as a front end that allows inline execution
  return r;
}

// A request of `items` batch items of `width` floats each, all equal to `value`.
inline std::unique_ptr<ScheduledRequest> BatchItem(float value, int64_t items = 1,
                                                   int64_t width = 4) {
  auto s = std::make_unique<ScheduledRequest>();
  s->request = Fp32InferenceRequest(std::vector<float>(static_cast<size_t>(items * width), value),
                                    {items, width});
  s->output_names = {"OUTPUT0"};
  return s;
}

inline std::vector<float> Floats(const Tensor& t) {
  std::vector<float> v(t.size_bytes / sizeof(float));
  std::memcpy(v.data(), t.data, t.size_bytes);
  return v;
}

}  // namespace harrier::testing
