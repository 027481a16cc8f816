// RecordingAccessLog: an AccessLog that keeps a copy of every record, for tests. Write() may be
// called from any thread (I/O threads, model workers, gRPC threads); the test reads from its own.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "harrier/access_log.h"

namespace harrier::testing {

class RecordingAccessLog : public AccessLog {
 public:
  // Every field (AccessRecord's string_views die with Write()).
  struct Copy {
    std::string request_id, protocol, method, target, error, model, inputs;
    int status = 0;
    int64_t version = 0;
    uint64_t request_bytes = 0, response_bytes = 0, output_ns = 0, total_ns = 0;
    InferenceTiming timing;
    int64_t prompt_tokens = -1, completion_tokens = 0;
    uint64_t first_token_ns = 0;
    std::string key_id;
    std::string client_request_id;
  };

  void Write(const AccessRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    records_.push_back({std::string(r.request_id), std::string(r.protocol), std::string(r.method),
                        std::string(r.target), std::string(r.error), std::string(r.model),
                        std::string(r.input_shapes_json), r.status, r.model_version,
                        r.request_bytes, r.response_bytes, r.output_ns, r.total_ns, r.timing,
                        r.prompt_tokens, r.completion_tokens, r.first_token_ns,
                        std::string(r.key_id), std::string(r.client_request_id)});
  }

  std::vector<Copy> records() const {
    std::lock_guard<std::mutex> lock(mu_);
    return records_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Copy> records_;
};

}  // namespace harrier::testing
