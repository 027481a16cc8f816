#include "backends/onnxruntime/onnxruntime_session_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace harrier::ort {
namespace {

using ::testing::HasSubstr;

TEST(ResolveSessionConfigTest, DefaultsAreForLatencyOnASmallMachine) {
  auto config = ResolveSessionConfig(InstanceOptions{});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->intra_op_threads, 1);  // 0: "backend chooses"
  EXPECT_EQ(config->inter_op_threads, 1);
  EXPECT_FALSE(config->parallel_execution);
  EXPECT_EQ(config->graph_optimization_level, 99);  // -1: ORT_ENABLE_ALL
  EXPECT_TRUE(config->enable_cpu_mem_arena);
  EXPECT_TRUE(config->enable_mem_pattern);
  EXPECT_FALSE(config->intra_op_allow_spinning);
  EXPECT_FALSE(config->inter_op_allow_spinning);
  EXPECT_TRUE(config->session_config_entries.empty());
}

TEST(ResolveSessionConfigTest, OptionsAndParameters) {
  struct Case {
    const char* what;
    InstanceOptions options;
    int intra, inter;
    bool parallel;
    int level;
    bool arena, pattern;
  };
  auto with = [](std::map<std::string, std::string> p, int intra = 0) {
    InstanceOptions o;
    o.intra_op_threads = intra;
    o.parameters = std::move(p);
    return o;
  };
  InstanceOptions explicit_options;
  explicit_options.intra_op_threads = 2;
  explicit_options.inter_op_threads = 3;
  explicit_options.parallel_execution = true;
  explicit_options.graph_optimization_level = 0;
  const std::vector<Case> cases = {
      {"options as given", explicit_options, 2, 3, true, 0, true, true},
      {"parameter beats option", with({{"intra_op_thread_count", "4"}}, 2), 4, 1, false, 99, true,
       true},
      {"parameter 0 keeps option", with({{"intra_op_thread_count", "0"}}, 2), 2, 1, false, 99, true,
       true},
      {"inter threads", with({{"inter_op_thread_count", "2"}}), 1, 2, false, 99, true, true},
      {"parallel", with({{"execution_mode", "1"}}), 1, 1, true, 99, true, true},
      {"sequential", with({{"execution_mode", "0"}}), 1, 1, false, 99, true, true},
      {"no arena", with({{"enable_mem_arena", "0"}}), 1, 1, false, 99, false, true},
      {"no pattern", with({{"enable_mem_pattern", "false"}}), 1, 1, false, 99, true, false},
      {"unknown keys ignored", with({{"max_batch_size", "x"}}), 1, 1, false, 99, true, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    auto config = ResolveSessionConfig(c.options);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    EXPECT_EQ(config->intra_op_threads, c.intra);
    EXPECT_EQ(config->inter_op_threads, c.inter);
    EXPECT_EQ(config->parallel_execution, c.parallel);
    EXPECT_EQ(config->graph_optimization_level, c.level);
    EXPECT_EQ(config->enable_cpu_mem_arena, c.arena);
    EXPECT_EQ(config->enable_mem_pattern, c.pattern);
  }
}

TEST(ResolveSessionConfigTest, SharingTheSessionIsOffUnlessAsked) {
  InstanceOptions o;
  EXPECT_FALSE(ResolveSessionConfig(o)->share_session);
  for (const char* on : {"1", "true"}) {
    o.parameters["share_session_between_instances"] = on;
    EXPECT_TRUE(ResolveSessionConfig(o)->share_session) << on;
  }
  for (const char* off : {"0", "false"}) {
    o.parameters["share_session_between_instances"] = off;
    EXPECT_FALSE(ResolveSessionConfig(o)->share_session) << off;
  }
}

TEST(ResolveSessionConfigTest, SessionEntriesPassThrough) {
  InstanceOptions o;
  o.parameters = {{"session.intra_op.allow_spinning", "1"},
                  {"session.use_device_allocator_for_initializers", "1"},
                  {"other", "z"}};
  auto config = ResolveSessionConfig(o);
  ASSERT_TRUE(config.ok());
  EXPECT_TRUE(config->intra_op_allow_spinning);
  EXPECT_FALSE(config->inter_op_allow_spinning);
  EXPECT_THAT(config->session_config_entries,
              ::testing::ElementsAre(std::pair<std::string, std::string>{
                  "session.use_device_allocator_for_initializers", "1"}));
}

// Entries that name files ONNX Runtime writes or reads, start threads or log are refused: a
// config override on the load API overwrote files and read directories through them (probe 29).
TEST(ResolveSessionConfigTest, SessionEntriesThatNameFilesOrThreadsAreRefused) {
  for (const char* key :
       {"session.optimized_model_filepath", "session.enable_profiling",
        "session.collect_node_memory_stats_to_file",
        "session.model_external_initializers_file_folder_path", "session.intra_op_num_threads",
        "session.intra_op_thread_affinities", "session.node_partition_config_file",
        "session.use_per_session_threads", "session.log_severity_level", "session.made_up"}) {
    InstanceOptions o;
    o.parameters[key] = "1";
    auto config = ResolveSessionConfig(o);
    ASSERT_FALSE(config.ok()) << key;
    EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument) << key;
    EXPECT_THAT(config.status().message(), HasSubstr(key));
  }
}

// The per-session caps multiply with the instances: 128 instances of 24 threads started 3,087
// threads from one load request (probe 29). One version's sessions start at most 1,024.
TEST(ResolveSessionConfigTest, AVersionsThreadsTogetherAreBounded) {
  InstanceOptions o;
  o.instance_count = 128;
  o.parameters["intra_op_thread_count"] = "24";
  auto over = ResolveSessionConfig(o);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(over.status().message(), HasSubstr("128 instance(s) x 24 thread(s) each is 3072"));
  o.parameters["share_session_between_instances"] = "true";  // one session for all of them
  EXPECT_TRUE(ResolveSessionConfig(o).ok());
  InstanceOptions fits;
  fits.instance_count = 4;
  fits.parameters["intra_op_thread_count"] = "256";
  EXPECT_TRUE(ResolveSessionConfig(fits).ok());
}

TEST(ResolveSessionConfigTest, MalformedValuesAreInvalidArgument) {
  struct Case {
    const char* key;
    const char* value;
  };
  const Case cases[] = {
      {"intra_op_thread_count", "-1"},
      {"intra_op_thread_count", "two"},
      {"inter_op_thread_count", "1.5"},
      {"inter_op_thread_count", ""},
      {"intra_op_thread_count", "257"},
      {"inter_op_thread_count", "1000000"},
      {"execution_mode", "2"},
      {"enable_mem_arena", "yes"},
      {"enable_mem_pattern", "10"},
      {"session.intra_op.allow_spinning", "true"},
      {"session.inter_op.allow_spinning", "2"},
      {"share_session_between_instances", "on"},
      // Passed-through entries are checked by kind before ONNX Runtime's stoi sees them (probe
      // 74: "abc" was a 500 saying only "stoi", "5x" read as 5, "nan" accepted).
      {"session.dynamic_block_base", "abc"},
      {"session.dynamic_block_base", "2147483648"},
      {"session.graph_optimizations_loop_level", "1x"},
      {"session.intra_op.spin_duration_us", "-1"},
      {"session.intra_op.spin_duration_us", " 5"},
      {"session.set_denormal_as_zero", "nan"},
      {"session.use_deterministic_compute", "true"},
      {"session.qdq_matmulnbits_block_size", "-1x"},
      {"session.qdq_matmulnbits_block_size", ""},
      {"session.qdq_matmulnbits_block_size", "2147483648"},  // probe 79: past an int
      {"session.qdq_matmulnbits_block_size", "-2147483649"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.key) + "=" + c.value);
    InstanceOptions o;
    o.parameters[c.key] = c.value;
    auto config = ResolveSessionConfig(o);
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(config.status().message(), HasSubstr(c.key));
  }
  for (int level : {-2, 4, 98, 100}) {
    InstanceOptions o;
    o.graph_optimization_level = level;
    EXPECT_EQ(ResolveSessionConfig(o).status().code(), StatusCode::kInvalidArgument) << level;
  }
  // -1 is ONNX Runtime's own "heuristic" block size (probe 77): a signed entry takes it.
  InstanceOptions heuristic;
  heuristic.parameters["session.qdq_matmulnbits_block_size"] = "-1";
  EXPECT_TRUE(ResolveSessionConfig(heuristic).ok());
  InstanceOptions most;
  most.parameters["intra_op_thread_count"] = std::to_string(kMaxThreadCount);
  ASSERT_TRUE(ResolveSessionConfig(most).ok());
  EXPECT_EQ(ResolveSessionConfig(most)->intra_op_threads, kMaxThreadCount);
  InstanceOptions negative;
  negative.intra_op_threads = -1;
  EXPECT_EQ(ResolveSessionConfig(negative).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace harrier::ort
