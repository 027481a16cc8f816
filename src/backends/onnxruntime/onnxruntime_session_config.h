// OnnxRuntimeSessionConfig: the ONNX Runtime session settings for one model instance, resolved
// from InstanceOptions and the model config's `parameters`. Resolving is a pure function (a
// table test covers it); applying the result to Ort::SessionOptions is a separate step.
//
// Parameters recognised (Triton's onnxruntime backend names, values as strings); a parameter
// wins over the matching InstanceOptions field, because a user wrote it on purpose:
//   intra_op_thread_count   int in 0..kMaxThreadCount; 0 keeps InstanceOptions::intra_op_threads
//   inter_op_thread_count   int in 0..kMaxThreadCount; 0 keeps InstanceOptions::inter_op_threads
//   execution_mode          "0" sequential, "1" parallel
//   enable_mem_arena        "0"/"1" (or "false"/"true"): ORT's CPU memory arena, default on
//   enable_mem_pattern      "0"/"1": ORT's memory pattern planning, default on
//   session.intra_op.allow_spinning, session.inter_op.allow_spinning
//                           "0"/"1": whether idle pool threads busy-wait (ORT's keys; checked here
//                           because ORT only reads them when it starts a thread pool)
//   session.<anything else> passed verbatim to ORT's AddSessionConfigEntry; ORT checks the value
//   share_session_between_instances
//                           "0"/"1" (or "false"/"true"), default off: a version's instances run
//                           one session, so its weights are in memory once
// Other keys are ignored: the same map holds parameters meant for other layers.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "harrier/backend.h"
#include "harrier/status.h"

namespace Ort {
struct SessionOptions;
}  // namespace Ort

namespace harrier::ort {

// The most threads a thread-count parameter may ask for (per session; a config with a count in
// the millions, from a typo or a load request's config override, is refused, not attempted).
inline constexpr int kMaxThreadCount = 256;
// The most threads one model version's sessions may start together (instances x threads per
// session): the per-session cap times 128 instances was 32,640 threads, a host's pid_max, from
// one load request (probe 29).
inline constexpr int kMaxVersionThreads = 1024;

struct OnnxRuntimeSessionConfig {
  // Threads inside one operator. 1 means ORT runs operators on the caller's thread with no
  // thread pool threads at all.
  int intra_op_threads = 1;
  // Threads across operators; only used by parallel execution.
  int inter_op_threads = 1;
  bool parallel_execution = false;
  // ONNX Runtime's GraphOptimizationLevel value: 0, 1, 2, 3 or 99 (ORT_ENABLE_ALL).
  int graph_optimization_level = 99;
  bool enable_cpu_mem_arena = true;
  bool enable_mem_pattern = true;
  // session.intra_op.allow_spinning / session.inter_op.allow_spinning. Off: pool threads sleep
  // when idle instead of busy-waiting; see docs/onnxruntime-backend.md for the measurement.
  bool intra_op_allow_spinning = false;
  bool inter_op_allow_spinning = false;
  // share_session_between_instances: the instances after the first run the first's session.
  bool share_session = false;
  // Other "session.*" entries, applied after the fields above.
  std::vector<std::pair<std::string, std::string>> session_config_entries;
};

// Resolves the settings. kInvalidArgument, naming the parameter, for a malformed value, a
// negative thread count or an unknown graph optimization level.
// Defaults: intra_op_threads 0 -> 1 (the model manager normally sets it); graph level -1 -> 99.
StatusOr<OnnxRuntimeSessionConfig> ResolveSessionConfig(const InstanceOptions& options);

// Writes `config` into `session_options`. Throws Ort::Exception (the caller catches it).
void ApplySessionConfig(const OnnxRuntimeSessionConfig& config,
                        Ort::SessionOptions* session_options);

}  // namespace harrier::ort
