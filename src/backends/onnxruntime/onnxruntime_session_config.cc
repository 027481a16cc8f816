#include "backends/onnxruntime/onnxruntime_session_config.h"

#include <onnxruntime_cxx_api.h>
#include <onnxruntime_session_options_config_keys.h>

#include <algorithm>
#include <charconv>
#include <iterator>
#include <optional>
#include <string_view>

namespace harrier::ort {
namespace {

// The `session.*` entries a model's config may pass to ONNX Runtime: numerics, optimizers and
// spinning only. Every entry was passed on once, and some name files that ONNX Runtime writes
// or reads (session.optimized_model_filepath overwrote any file the server could write;
// session.model_external_initializers_file_folder_path read any directory into a model's
// outputs), start threads past the thread-count limits (session.intra_op_num_threads), or log:
// a config override on the load API could do all of it (probe 29).
// What a passed-through entry's value must be: ONNX Runtime reads the flags as "0"/"1" and the
// numbers with std::stoi, which threw a bare "stoi" (a 500 naming no parameter) for "abc" and
// read a prefix of "5x" (probe 74): each value is checked here first, by name.
enum class EntryValue { kFlag, kWholeNumber, kInteger };

struct PassedThroughEntry {
  std::string_view key;
  EntryValue value;
};

constexpr PassedThroughEntry kPassedThrough[] = {
    {"session.allow_released_opsets_only", EntryValue::kFlag},
    {"session.disable_aot_function_inlining", EntryValue::kFlag},
    {"session.disable_cpu_ep_fallback", EntryValue::kFlag},
    {"session.disable_double_qdq_remover", EntryValue::kFlag},
    {"session.disable_prepacking", EntryValue::kFlag},
    {"session.disable_qdq_constant_folding", EntryValue::kFlag},
    {"session.disable_quant_qdq", EntryValue::kFlag},
    {"session.dynamic_block_base", EntryValue::kWholeNumber},
    {"session.enable_dq_matmulnbits_fusion", EntryValue::kFlag},
    {"session.enable_quant_qdq_cleanup", EntryValue::kFlag},
    {"session.force_spinning_stop", EntryValue::kFlag},
    {"session.graph_optimizations_loop_level", EntryValue::kWholeNumber},
    {"session.inter_op.spin_backoff_max", EntryValue::kWholeNumber},
    {"session.inter_op.spin_duration_us", EntryValue::kWholeNumber},
    {"session.intra_op.spin_backoff_max", EntryValue::kWholeNumber},
    {"session.intra_op.spin_duration_us", EntryValue::kWholeNumber},
    {"session.qdq_matmulnbits_accuracy_level", EntryValue::kWholeNumber},
    {"session.qdq_matmulnbits_block_size", EntryValue::kInteger},  // -1: ORT's heuristic
    {"session.qdqisint8allowed", EntryValue::kFlag},
    {"session.set_denormal_as_zero", EntryValue::kFlag},
    {"session.strict_shape_type_inference", EntryValue::kFlag},
    {"session.use_deterministic_compute", EntryValue::kFlag},
    {"session.use_device_allocator_for_initializers", EntryValue::kFlag},
    {"session.x64quantprecision", EntryValue::kFlag},
};

const PassedThroughEntry* FindPassedThroughEntry(std::string_view key) {
  for (const PassedThroughEntry& e : kPassedThrough)
    if (e.key == key) return &e;
  return nullptr;
}

std::optional<int> ParseNonNegativeInt(std::string_view s) {
  int value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || value < 0) return std::nullopt;
  return value;
}

std::optional<bool> ParseBool(std::string_view s) {
  if (s == "1" || s == "true") return true;
  if (s == "0" || s == "false") return false;
  return std::nullopt;
}

Status BadParameter(const std::string& key, const std::string& value, std::string_view expected) {
  return InvalidArgument("parameter '" + key + "' is '" + value + "'; expected " +
                         std::string(expected));
}

GraphOptimizationLevel ToOrtLevel(int level) {
  switch (level) {
    case 0: return ORT_DISABLE_ALL;
    case 1: return ORT_ENABLE_BASIC;
    case 2: return ORT_ENABLE_EXTENDED;
    case 3: return ORT_ENABLE_LAYOUT;
    default: return ORT_ENABLE_ALL;
  }
}

}  // namespace

StatusOr<OnnxRuntimeSessionConfig> ResolveSessionConfig(const InstanceOptions& options) {
  OnnxRuntimeSessionConfig config;
  if (options.intra_op_threads < 0) {
    return InvalidArgument("intra_op_threads is " + std::to_string(options.intra_op_threads) +
                           "; expected >= 0");
  }
  if (options.inter_op_threads < 0) {
    return InvalidArgument("inter_op_threads is " + std::to_string(options.inter_op_threads) +
                           "; expected >= 0");
  }
  config.intra_op_threads = options.intra_op_threads == 0 ? 1 : options.intra_op_threads;
  config.inter_op_threads = options.inter_op_threads == 0 ? 1 : options.inter_op_threads;
  config.parallel_execution = options.parallel_execution;
  switch (options.graph_optimization_level) {
    case -1: config.graph_optimization_level = 99; break;
    case 0:
    case 1:
    case 2:
    case 3:
    case 99: config.graph_optimization_level = options.graph_optimization_level; break;
    default:
      return InvalidArgument("graph_optimization_level is " +
                             std::to_string(options.graph_optimization_level) +
                             "; expected -1, 0, 1, 2, 3 or 99");
  }

  for (const auto& [key, value] : options.parameters) {
    if (key == "intra_op_thread_count" || key == "inter_op_thread_count") {
      std::optional<int> n = ParseNonNegativeInt(value);
      if (!n || *n > kMaxThreadCount) {
        return BadParameter(key, value, "an integer in 0.." + std::to_string(kMaxThreadCount));
      }
      if (*n == 0) continue;  // Triton's meaning: leave the default
      int& field =
          key == "intra_op_thread_count" ? config.intra_op_threads : config.inter_op_threads;
      field = *n;
    } else if (key == "execution_mode") {
      if (value != "0" && value != "1")
        return BadParameter(key, value, "0 (sequential) or 1 (parallel)");
      config.parallel_execution = value == "1";
    } else if (key == "enable_mem_arena" || key == "enable_mem_pattern" ||
               key == "share_session_between_instances") {
      std::optional<bool> b = ParseBool(value);
      if (!b) return BadParameter(key, value, "0, 1, false or true");
      bool& field = key == "enable_mem_arena"     ? config.enable_cpu_mem_arena
                    : key == "enable_mem_pattern" ? config.enable_mem_pattern
                                                  : config.share_session;
      field = *b;
    } else if (key == kOrtSessionOptionsConfigAllowIntraOpSpinning ||
               key == kOrtSessionOptionsConfigAllowInterOpSpinning) {
      if (value != "0" && value != "1") return BadParameter(key, value, "0 or 1");
      (key == kOrtSessionOptionsConfigAllowIntraOpSpinning ? config.intra_op_allow_spinning
                                                           : config.inter_op_allow_spinning) =
          value == "1";
    } else if (key.starts_with("session.")) {
      const PassedThroughEntry* entry = FindPassedThroughEntry(key);
      if (entry == nullptr) {
        return InvalidArgument(
            "parameter '" + key +
            "' is not an ONNX Runtime session entry Harrier passes on (those that name files, "
            "threads, logging or model formats are not: docs/onnxruntime-backend.md)");
      }
      if (entry->value == EntryValue::kFlag && value != "0" && value != "1")
        return BadParameter(key, value, "0 or 1");
      if (entry->value == EntryValue::kWholeNumber && !ParseNonNegativeInt(value))
        return BadParameter(key, value, "a whole number in 0..2147483647");
      int integer = 0;
      if (entry->value == EntryValue::kInteger && (value.empty() || [&] {
            const auto [end, ec] =
                std::from_chars(value.data(), value.data() + value.size(), integer);
            return ec != std::errc() || end != value.data() + value.size();
          }()))
        return BadParameter(key, value, "a whole number in -2147483648..2147483647");
      config.session_config_entries.emplace_back(key, value);
    }
  }
  const int64_t per_session =
      int64_t{config.intra_op_threads} + (config.parallel_execution ? config.inter_op_threads : 0);
  const int64_t sessions = config.share_session ? 1 : std::max(1, options.instance_count);
  if (per_session * sessions > kMaxVersionThreads) {
    return InvalidArgument(std::to_string(sessions) + " instance(s) x " +
                           std::to_string(per_session) + " thread(s) each is " +
                           std::to_string(per_session * sessions) + " threads, over the " +
                           std::to_string(kMaxVersionThreads) +
                           " one model version may start (fewer instances or threads, or "
                           "share_session_between_instances)");
  }
  return config;
}

void ApplySessionConfig(const OnnxRuntimeSessionConfig& config, Ort::SessionOptions* so) {
  so->SetIntraOpNumThreads(config.intra_op_threads);
  so->SetInterOpNumThreads(config.inter_op_threads);
  so->SetExecutionMode(config.parallel_execution ? ORT_PARALLEL : ORT_SEQUENTIAL);
  so->SetGraphOptimizationLevel(ToOrtLevel(config.graph_optimization_level));
  if (config.enable_cpu_mem_arena) {
    so->EnableCpuMemArena();
  } else {
    so->DisableCpuMemArena();
  }
  if (config.enable_mem_pattern) {
    so->EnableMemPattern();
  } else {
    so->DisableMemPattern();
  }
  so->AddConfigEntry(kOrtSessionOptionsConfigAllowIntraOpSpinning,
                     config.intra_op_allow_spinning ? "1" : "0");
  so->AddConfigEntry(kOrtSessionOptionsConfigAllowInterOpSpinning,
                     config.inter_op_allow_spinning ? "1" : "0");
  for (const auto& [key, value] : config.session_config_entries)
    so->AddConfigEntry(key.c_str(), value.c_str());
}

}  // namespace harrier::ort
