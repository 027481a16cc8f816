#include "backends/llamacpp/llamacpp_backend.h"

#include <algorithm>
#include <charconv>

#include "backends/llamacpp/llama_engine.h"

namespace harrier {
namespace {

// The parameter `key` as an int into `*out`; untouched when absent.
Status ReadInt(const std::map<std::string, std::string>& parameters, const std::string& key,
               int* out) {
  auto it = parameters.find(key);
  if (it == parameters.end()) return Status::Ok();
  const std::string& text = it->second;
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return InvalidArgument("parameter '" + key + "' must be a decimal integer, not '" + text + "'");
  }
  *out = value;
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<GenerativeModel>> LlamaCppBackend::Load(
    const std::string& model_path, const std::map<std::string, std::string>& parameters,
    int usable_cores) {
  LlamaEngine::Options options;
  options.model_path = model_path;
  options.threads = usable_cores > 0 ? usable_cores : 0;
  RETURN_IF_ERROR(ReadInt(parameters, "context_size", &options.context_size));
  RETURN_IF_ERROR(ReadInt(parameters, "threads", &options.threads));
  RETURN_IF_ERROR(ReadInt(parameters, "parallel_sequences", &options.parallel_sequences));
  RETURN_IF_ERROR(ReadInt(parameters, "batch_size", &options.batch_size));
  // Unset, it follows a smaller batch_size: "batch_size: 256" alone was refused for the
  // default ubatch_size of 512 (probe 29), where llama.cpp itself clamps it.
  if (!parameters.contains("ubatch_size"))
    options.ubatch_size = std::min(options.ubatch_size, options.batch_size);
  RETURN_IF_ERROR(ReadInt(parameters, "ubatch_size", &options.ubatch_size));
  RETURN_IF_ERROR(ReadInt(parameters, "max_waiting_requests", &options.max_waiting_requests));
  ASSIGN_OR_RETURN(std::unique_ptr<LlamaEngine> engine, LlamaEngine::Create(options));
  return std::unique_ptr<GenerativeModel>(std::move(engine));
}

}  // namespace harrier
