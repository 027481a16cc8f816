#include "lifecycle/model_repository_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/status_mapping.h"
#include "observability/text_exposition.h"
#include "util/fake_backend.h"
#include "util/fake_generative_model.h"
#include "util/recording_log.h"
#include "util/scheduled_request_builder.h"

namespace harrier {
namespace {

namespace fs = std::filesystem;

class ModelRepositoryManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("harrier-mgr-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const std::string& rel, const std::string& content) {
    fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << content;
  }

  ModelRepositoryManager::Options Options(std::string path, int cores) {
    ModelRepositoryManager::Options o;
    o.repository_path = std::move(path);
    o.backends = &backends_;
    o.usable_cores = cores;
    return o;
  }

  std::unique_ptr<ModelRepositoryManager> Load(int cores = 2) {
    auto m = ModelRepositoryManager::Create(Options(root_.string(), cores));
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    (*m)->LoadAll();
    return std::move(m).value();
  }

  // Load() with the fake text generator beside the tensor backend.
  std::unique_ptr<ModelRepositoryManager> LoadWithGenerators() {
    auto o = Options(root_.string(), 2);
    o.backends = &with_generators_;
    auto m = ModelRepositoryManager::Create(o);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    (*m)->LoadAll();
    return std::move(m).value();
  }

  // A poll-mode manager on root_ after its start, polled by hand (PollNow()).
  std::unique_ptr<ModelRepositoryManager> Polled() {
    auto o = Options(root_.string(), 2);
    o.control_mode = ModelControlMode::kPoll;
    o.poll_interval = std::chrono::hours(1);
    auto created = ModelRepositoryManager::Create(o);
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    (*created)->LoadAll();
    return std::move(created).value();
  }

  // An explicit-mode manager on root_ after its start: `startup` names the models loaded then
  // (--load-model; none by default), `overrides` where file overrides go ($TMPDIR when empty).
  // `backends`: the fixture's tensor backend when null (&with_generators_ for a text generator).
  std::unique_ptr<ModelRepositoryManager> Explicit(std::vector<std::string> startup = {},
                                                   std::string overrides = "",
                                                   const BackendRegistry* backends = nullptr) {
    auto o = Options(root_.string(), 2);
    if (backends != nullptr) o.backends = backends;
    o.control_mode = ModelControlMode::kExplicit;
    o.startup_models = std::move(startup);
    o.override_parent_directory = std::move(overrides);
    auto created = ModelRepositoryManager::Create(o);
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    (*created)->LoadAll();
    return std::move(created).value();
  }

  static std::unique_ptr<InferenceRequest> Fp32Request(std::vector<float> values, Shape shape) {
    return testing::Fp32InferenceRequest(values, std::move(shape));
  }

  static StatusOr<InferenceResponse> InferSync(ServableModel& m,
                                               std::unique_ptr<InferenceRequest> r) {
    std::promise<StatusOr<InferenceResponse>> p;
    auto f = p.get_future();
    m.Infer(std::move(r), [&](StatusOr<InferenceResponse> resp) { p.set_value(std::move(resp)); });
    return f.get();
  }

  fs::path root_;
  testing::FakeBackend backend_;
  BackendRegistry backends_ = [this] {
    BackendRegistry r;
    r.AddTensorBackend(&backend_);
    return r;
  }();
  // The tensor backend beside a fake text generator, for the tests of generative models.
  testing::FakeGenerativeBackend generators_;
  BackendRegistry with_generators_ = [this] {
    BackendRegistry r;
    r.AddTensorBackend(&backend_);
    r.AddGenerativeBackend(&generators_);
    return r;
  }();
};

TEST_F(ModelRepositoryManagerTest, UnusableRepositoryFailsFast) {
  EXPECT_EQ(ModelRepositoryManager::Create(Options((root_ / "nope").string(), 1)).status().code(),
            StatusCode::kNotFound);
  Write("file", "x");
  EXPECT_EQ(ModelRepositoryManager::Create(Options((root_ / "file").string(), 1)).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(ModelRepositoryManagerTest, CorruptModelIsUnavailableWhileOthersServe) {
  Write("good/1/model.onnx", "identity FP32 -1 4");
  Write("bad/1/model.onnx", "garbage");
  Write("noversions/README", "x");
  auto m = Load();
  EXPECT_FALSE(m->AllReady());
  auto rows = m->Index();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].name, "bad");
  EXPECT_EQ(rows[0].state, ModelState::kUnavailable);
  EXPECT_NE(rows[0].reason.find("bad/1/model.onnx"), std::string::npos) << rows[0].reason;
  EXPECT_EQ(rows[1].name, "good");
  EXPECT_EQ(rows[1].state, ModelState::kReady);
  EXPECT_EQ(rows[2].name, "noversions");
  EXPECT_EQ(rows[2].state, ModelState::kUnavailable);

  EXPECT_EQ(m->Get("bad", std::nullopt).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(m->Get("missing", std::nullopt).status().code(), StatusCode::kNotFound);
  // Triton's words, which its clients and QA tests match the start of.
  auto starts = [](const Status& s, std::string_view prefix) {
    return s.message().rfind(prefix, 0) == 0;
  };
  EXPECT_TRUE(starts(m->Get("missing", std::nullopt).status(),
                     "Request for unknown model: 'missing' is not found"));
  EXPECT_TRUE(starts(m->Get("good", 7).status(),
                     "Request for unknown model: 'good' version 7 is not found"));
  EXPECT_TRUE(starts(m->Get("bad", std::nullopt).status(),
                     "Request for unknown model: 'bad' has no available versions"))
      << m->Get("bad", std::nullopt).status().ToString();
  EXPECT_TRUE(starts(m->Stats("bad", std::nullopt).status(),
                     "Request for unknown model: 'bad' has no available versions"));
  EXPECT_EQ(m->Get("good", 2).status().code(), StatusCode::kNotFound);
  auto good = m->Get("good", std::nullopt);
  ASSERT_TRUE(good.ok());
  auto resp = InferSync(**good, Fp32Request({1, 2, 3, 4}, {1, 4}));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  ASSERT_EQ(resp->outputs.size(), 1u);
  EXPECT_EQ(resp->outputs[0].name, "OUTPUT0");
  EXPECT_EQ(resp->outputs[0].size_bytes, 16u);
}

TEST_F(ModelRepositoryManagerTest, SymlinkLoopIsLoggedAndListedUnavailable) {
  Write("good/1/model.onnx", "identity FP32 -1 4");
  fs::create_directory_symlink(root_ / "loop", root_ / "loop");
  testing::RecordingLog log;
  auto m = Load();
  EXPECT_FALSE(m->AllReady());
  auto rows = m->Index();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "good");
  EXPECT_EQ(rows[0].state, ModelState::kReady);
  EXPECT_EQ(rows[1].name, "loop");
  EXPECT_EQ(rows[1].version, 0);
  EXPECT_EQ(rows[1].state, ModelState::kUnavailable);
  EXPECT_NE(rows[1].reason.find("symbolic link loop"), std::string::npos) << rows[1].reason;
  EXPECT_EQ(m->Get("loop", std::nullopt).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(log.Find(spdlog::level::warn, "model 'loop'").size(), 1u);
}

// The engine is chosen per model: a GGUF version is a text generator's, which a registry
// without one refuses by name, while the tensor model beside it loads.
TEST_F(ModelRepositoryManagerTest, AGeneratorTheBuildLacksIsRefusedByName) {
  Write("tensor/1/model.onnx", "identity FP32 -1 4");
  Write("text/1/model.gguf", "gguf");
  auto m = Load();
  std::map<std::string, ModelVersionState> rows;
  for (const ModelVersionState& row : m->Index()) rows[row.name] = row;
  EXPECT_EQ(rows["tensor"].state, ModelState::kReady);
  EXPECT_EQ(rows["text"].state, ModelState::kUnavailable);
  EXPECT_NE(rows["text"].reason.find("this model generates text (llama.cpp), and this build of "
                                     "the server has no llama.cpp engine"),
            std::string::npos)
      << rows["text"].reason;
}

// A text generator answers a request with many responses: its config says decoupled, as
// Triton's decoupled models' do, and a config that says otherwise is refused by name.
TEST_F(ModelRepositoryManagerTest, AGeneratorIsDecoupledAndAConfigSayingOtherwiseIsRefused) {
  Write("text/1/model.gguf", "gguf");
  Write("said/1/model.gguf", "gguf");
  Write("said/config.pbtxt", "model_transaction_policy { decoupled: true }");
  Write("not/1/model.gguf", "gguf");
  Write("not/config.pbtxt", "model_transaction_policy { decoupled: false }");
  Write("cached/1/model.gguf", "gguf");
  Write("cached/config.pbtxt", "response_cache { enable: true }");
  auto loaded = LoadWithGenerators();
  auto& m = *loaded;
  for (const char* name : {"text", "said"}) {
    auto model = m.Get(name, std::nullopt);
    ASSERT_TRUE(model.ok()) << name << ": " << model.status().ToString();
    EXPECT_NE((*model)->ConfigJson().find(R"("model_transaction_policy":{"decoupled":true})"),
              std::string::npos)
        << (*model)->ConfigJson();
  }
  std::map<std::string, ModelVersionState> rows;
  for (const ModelVersionState& row : m.Index()) rows[row.name] = row;
  EXPECT_EQ(rows["not"].state, ModelState::kUnavailable);
  EXPECT_NE(rows["not"].reason.find("model_transaction_policy: decoupled is false, but a "
                                    "llama.cpp model answers a request with many responses"),
            std::string::npos)
      << rows["not"].reason;
  EXPECT_EQ(rows["cached"].state, ModelState::kUnavailable);
  EXPECT_NE(rows["cached"].reason.find("this server has no response cache"), std::string::npos)
      << rows["cached"].reason;
  m.Shutdown();
}

// A version policy's own mistakes are the reason, in its words: a specific policy listing
// nothing read as "no version directories", and -1 as a version without a directory (probe 29).
TEST_F(ModelRepositoryManagerTest, AVersionPolicysOwnMistakeIsTheReason) {
  Write("empty/1/model.onnx", "identity FP32 -1 4");
  Write("empty/config.pbtxt", "version_policy { specific { } }");
  Write("negative/1/model.onnx", "identity FP32 -1 4");
  Write("negative/config.pbtxt", "version_policy { specific { versions: [-1] } }");
  auto m = Load();
  auto rows = m->Index();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_NE(rows[0].reason.find("specific.versions lists no version"), std::string::npos)
      << rows[0].reason;
  EXPECT_NE(rows[1].reason.find("specific.versions has -1; versions are >= 1"), std::string::npos)
      << rows[1].reason;
  EXPECT_NE(rows[1].reason.find("config.pbtxt"), std::string::npos) << rows[1].reason;
}

// A generative model's config that names another model is refused, as a tensor model's is: it
// served under its directory's name while its config said another (probe 29, M3).
TEST_F(ModelRepositoryManagerTest, AGenerativeConfigNamingAnotherModelIsRefused) {
  Write("text/1/model.gguf", "gguf");
  Write("text/config.pbtxt", "name: \"someone_else\"");
  auto o = Options(root_.string(), 2);
  o.backends = &with_generators_;
  auto created = ModelRepositoryManager::Create(o);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto& m = **created;
  m.LoadAll();
  auto rows = m.Index();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].state, ModelState::kUnavailable);
  EXPECT_NE(rows[0].reason.find("name 'someone_else' in the config does not match"),
            std::string::npos)
      << rows[0].reason;
  m.Shutdown();
}

// A generation still running when its version goes is ended with the server's reason (an
// unload, a version retired by a reload, the server stopping), never as if its client had
// cancelled: the client reads it (probe 13, L2).
TEST_F(ModelRepositoryManagerTest, AGeneratorIsShutDownWithTheReasonItsVersionWent) {
  Write("text/1/model.gguf", "gguf");
  auto manager = Explicit({"text"}, "", &with_generators_);
  auto& m = *manager;
  ASSERT_TRUE(m.Get("text", std::nullopt).ok());
  auto call = [&](auto op) {
    std::promise<Status> done;
    op([&](Status s) { done.set_value(s); });
    return done.get_future().get();
  };
  // A changed config reloads it: the version it replaces is retired.
  Write("text/config.pbtxt",
        "parameters { key: \"context_size\" value: { string_value: \"256\" } }");
  ASSERT_TRUE(call([&](auto done) { m.LoadModel("text", {}, done); }).ok());
  ASSERT_TRUE(call([&](auto done) { m.UnloadModel("text", done); }).ok());
  ASSERT_TRUE(call([&](auto done) { m.LoadModel("text", {}, done); }).ok());
  m.Shutdown();
  const std::vector<Status> reasons = generators_.shutdown_reasons();
  ASSERT_EQ(reasons.size(), 3u);
  for (const Status& why : reasons) EXPECT_EQ(why.code(), StatusCode::kUnavailable);
  EXPECT_EQ(reasons[0].message(),
            "model 'text' version 1 was retired (a reload replaced it, or its version policy no "
            "longer selects it)");
  EXPECT_EQ(reasons[1].message(), "model 'text' version 1 was unloaded");
  EXPECT_EQ(reasons[2].message(), "the server is shutting down");
}

// What clients read (index, Get()'s errors, the status page) names files relative to the
// repository; the log keeps the full path.
TEST_F(ModelRepositoryManagerTest, ReasonsSentToClientsHoldRepositoryRelativePaths) {
  Write("bad/1/model.onnx", "garbage");                   // the backend's error
  Write("badconfig/1/model.onnx", "identity FP32 -1 4");  // the config parser's
  Write("badconfig/config.pbtxt", "no_such_field: 1\n");
  Write("missing/1/model.onnx", "identity FP32 -1 4");  // the manager's own
  Write("missing/config.pbtxt", "version_policy { specific { versions: [1, 7] } }");
  Write("noversions/README", "x");
  fs::create_directory_symlink(root_ / "loop", root_ / "loop");  // the scan's
  testing::RecordingLog log;
  auto m = Load();
  const std::string root = root_.string();
  std::map<std::string, std::string> reasons;
  for (const ModelVersionState& row : m->Index()) {
    if (row.state == ModelState::kReady) continue;
    EXPECT_EQ(row.reason.find(root), std::string::npos) << row.name << ": " << row.reason;
    reasons[row.name + "/" + std::to_string(row.version)] = row.reason;
  }
  EXPECT_EQ(reasons["bad/1"].rfind("bad/1/model.onnx: not a valid", 0), 0u) << reasons["bad/1"];
  EXPECT_EQ(reasons["badconfig/0"].rfind("badconfig/config.pbtxt:1:", 0), 0u)
      << reasons["badconfig/0"];
  EXPECT_NE(reasons["missing/7"].find("no directory in missing"), std::string::npos)
      << reasons["missing/7"];
  EXPECT_NE(reasons["noversions/0"].find("in noversions"), std::string::npos)
      << reasons["noversions/0"];
  EXPECT_NE(reasons["loop/0"].find("'loop'"), std::string::npos) << reasons["loop/0"];
  for (const char* name : {"bad", "badconfig", "loop"}) {
    const Status got = m->Get(name, std::nullopt).status();
    EXPECT_EQ(got.message().find(root), std::string::npos) << got.message();
  }
  EXPECT_EQ(m->Get("missing", 7).status().message().find(root), std::string::npos);
  for (const DashboardVersion& row : m->DashboardVersions())
    EXPECT_EQ(row.state.reason.find(root), std::string::npos) << row.state.reason;
  // The log still names the files in full.
  EXPECT_EQ(log.Find(spdlog::level::err, root + "/bad/1/model.onnx").size(), 1u);
}

// Found by the model_load fuzzer: a specific policy naming only versions that have no
// directory left the model LOADING for good, silently, and the server never ready.
TEST_F(ModelRepositoryManagerTest, APolicyNamingOnlyMissingVersionsIsUnavailableAndSaysWhy) {
  Write("m/1/model.onnx", "identity FP32 -1 4");
  Write("m/2/model.onnx", "identity FP32 -1 4");
  Write("m/config.pbtxt", "version_policy { specific { versions: [4, 7] } }");
  testing::RecordingLog log;
  auto m = Load();
  const std::vector<ModelVersionState> rows = m->Index();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].state, ModelState::kUnavailable);
  EXPECT_NE(rows[0].reason.find("names version(s) 4, 7, none of which has a directory in m "
                                "(the versions there: 1, 2)"),
            std::string::npos)
      << rows[0].reason;
  EXPECT_FALSE(m->AllReady());
  EXPECT_EQ(m->Get("m", std::nullopt).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(log.Find(spdlog::level::err, "none of which has a directory").size(), 1u);
}

TEST_F(ModelRepositoryManagerTest, AutoCompletesBatchAndReportsMetadata) {
  Write("m/1/model.onnx", "identity FP32 -1 4");
  auto m = Load();
  EXPECT_TRUE(m->AllReady());
  auto servable = m->Get("m", 1);
  ASSERT_TRUE(servable.ok());
  EXPECT_GT((*servable)->max_batch_size(), 0);
  auto md = m->Metadata("m", std::nullopt);
  ASSERT_TRUE(md.ok());
  EXPECT_EQ(md->platform, "onnxruntime_onnx");
  EXPECT_EQ(md->versions, std::vector<std::string>{"1"});
  ASSERT_EQ(md->inputs.size(), 1u);
  EXPECT_EQ(md->inputs[0].dims, (std::vector<int64_t>{-1, 4}));
  EXPECT_NE((*servable)->ConfigJson().find("\"max_batch_size\""), std::string::npos);
}

TEST_F(ModelRepositoryManagerTest, LatestVersionByDefaultAndVersionPolicy) {
  Write("m/1/model.onnx", "identity FP32 -1 4");
  Write("m/3/model.onnx", "identity FP32 -1 4");
  Write("all/1/model.onnx", "identity FP32 -1 4");
  Write("all/2/model.onnx", "identity FP32 -1 4");
  Write("all/config.pbtxt", "version_policy { all {} }");
  auto m = Load();
  auto latest = m->Get("m", std::nullopt);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ((*latest)->version(), 3);
  EXPECT_EQ(m->Get("m", 1).status().code(), StatusCode::kNotFound);  // not loaded by policy
  EXPECT_TRUE(m->Get("all", 1).ok());
  EXPECT_TRUE(m->Get("all", 2).ok());
}

TEST_F(ModelRepositoryManagerTest, BadConfigNamesTheFile) {
  Write("m/1/model.onnx", "identity FP32 -1 4");
  Write("m/config.pbtxt", "max_batch_size: 4\nno_such_field: 1\n");
  Write("n/1/model.onnx", "identity FP32 -1 4");
  Write("n/config.pbtxt",
        "input [{ name: \"INPUT0\" data_type: TYPE_INT32 dims: [4] }]\nmax_batch_size: 4");
  auto m = Load();
  auto rows = m->Index();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].state, ModelState::kUnavailable);
  EXPECT_NE(rows[0].reason.find("config.pbtxt"), std::string::npos) << rows[0].reason;
  EXPECT_NE(rows[0].reason.find("no_such_field"), std::string::npos) << rows[0].reason;
  EXPECT_EQ(rows[1].state, ModelState::kUnavailable);
  EXPECT_NE(rows[1].reason.find("INPUT0"), std::string::npos) << rows[1].reason;
}

TEST_F(ModelRepositoryManagerTest, InstancesThreadsAndWarmup) {
  Write("m/1/model.onnx", "identity FP32 -1 4");
  Write("m/config.pbtxt", "instance_group [{ count: 2 kind: KIND_CPU }]");
  auto m = Load(/*cores=*/4);
  EXPECT_EQ(backend_.instances_created.load(), 2);
  EXPECT_EQ(backend_.siblings_created.load(), 1);          // the second is made from the first
  EXPECT_EQ(backend_.last_options().intra_op_threads, 2);  // 2 instances x 2 threads = 4 cores
  EXPECT_EQ(backend_.runs.load(), 2);                      // one zero-filled warm-up each
}

// A backend whose instances say their signature is not asked to read the file again; one
// whose instances do not is inspected once per load. Both complete the config alike.
TEST_F(ModelRepositoryManagerTest, TheSignatureComesFromTheFirstInstanceWhenItSaysIt) {
  Write("m/1/model.onnx", "identity FP32 -1 4");
  Write("m/config.pbtxt", "instance_group [{ count: 2 kind: KIND_CPU }]");
  for (bool report : {true, false}) {
    SCOPED_TRACE(report);
    backend_.instances_report_signature = report;
    backend_.inspections = 0;
    backend_.instances_created = 0;
    auto m = Load();
    EXPECT_TRUE(m->AllReady());
    EXPECT_EQ(backend_.instances_created.load(), 2);
    EXPECT_EQ(backend_.inspections.load(), report ? 0 : 1);
    auto md = m->Metadata("m", std::nullopt);
    ASSERT_TRUE(md.ok());
    ASSERT_EQ(md->inputs.size(), 1u);
    EXPECT_EQ(md->inputs[0].dims, (std::vector<int64_t>{-1, 4}));
  }
  // A config the model contradicts is refused by name with either.
  Write("m/config.pbtxt",
        "input [{ name: \"INPUT0\" data_type: TYPE_INT32 dims: [4] }]\nmax_batch_size: 4");
  backend_.instances_report_signature = true;
  auto m = Load();
  auto rows = m->Index();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].state, ModelState::kUnavailable);
  EXPECT_NE(rows[0].reason.find("INPUT0"), std::string::npos) << rows[0].reason;
}

// No model_warmup: the implicit zero-filled run is an optimisation, so a graph that cannot take
// zeros still serves; the failure is logged and counted.
TEST_F(ModelRepositoryManagerTest, FailedDefaultWarmupIsAWarningAndTheModelServes) {
  Write("divides/1/model.onnx", "zero_fails FP32 -1 4");
  testing::RecordingLog log;
  auto m = Load();
  EXPECT_TRUE(m->AllReady());
  auto rows = m->Index();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].state, ModelState::kReady);
  EXPECT_EQ(rows[0].reason, "");
  const auto warnings = log.Find(spdlog::level::warn, "default warm-up failed");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].message.find("integer division by zero"), std::string::npos)
      << warnings[0].message;
  TextExposition metrics;
  m->CollectMetrics(&metrics);
  EXPECT_NE(metrics.Text().find(
                "harrier_model_warmup_failures_total{model=\"divides\",version=\"1\"} 1\n"),
            std::string::npos)
      << metrics.Text();

  auto s = m->Get("divides", std::nullopt);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(InferSync(**s, Fp32Request({1, 2, 3, 4}, {1, 4})).ok());
  EXPECT_EQ(InferSync(**s, Fp32Request({0, 0, 0, 0}, {1, 4})).status().code(),
            StatusCode::kInvalidArgument);
}

// The index of two models: `ready` READY, then `failed` UNAVAILABLE with `reason` in its reason
// (in name order).
void ExpectReadyThenFailed(const std::vector<ModelVersionState>& rows, const std::string& ready,
                           const std::string& failed, const std::string& reason) {
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, ready);
  EXPECT_EQ(rows[0].state, ModelState::kReady) << rows[0].reason;
  EXPECT_EQ(rows[1].name, failed);
  EXPECT_EQ(rows[1].state, ModelState::kUnavailable);
  EXPECT_NE(rows[1].reason.find(reason), std::string::npos) << rows[1].reason;
}

// label_filename (Triton's classification labels): read at load, line i naming class i, for
// the front ends to add to classification answers; a missing file fails that model's load, as
// in Triton.
TEST_F(ModelRepositoryManagerTest, LabelFilesAreReadAtLoadAndAMissingOneFailsTheLoad) {
  Write("labelled/1/model.onnx", "identity FP32 -1 4");
  Write("labelled/config.pbtxt",
        "output [{ name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [4] "
        "label_filename: \"labels.txt\" }]");
  Write("labelled/labels.txt", "cat\r\ndog\n\nbird\n");
  Write("unlabelled/1/model.onnx", "identity FP32 -1 4");
  Write("unlabelled/config.pbtxt",
        "output [{ name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [4] "
        "label_filename: \"nope.txt\" }]");
  auto m = Load();
  ExpectReadyThenFailed(m->Index(), "labelled", "unlabelled", "label_filename 'nope.txt'");

  auto s = m->Get("labelled", std::nullopt);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto labels = (*s)->ClassificationLabels("OUTPUT0");
  ASSERT_NE(labels, nullptr);
  EXPECT_EQ(*labels, (std::vector<std::string>{"cat", "dog", "", "bird"}));
  EXPECT_EQ((*s)->ClassificationLabels("OUTPUT1"), nullptr);
}

// A labels file that is a link out of the model's directory fails the load: the name's check
// passed, and classification answers sent the linked file to clients, a line per class (probe 29).
TEST_F(ModelRepositoryManagerTest, ALabelsFileLinkedOutOfTheModelDirectoryFailsTheLoad) {
  Write("secret.txt", "root:x:0:0\n");  // in the repository's root, outside the model
  Write("linked/1/model.onnx", "identity FP32 -1 4");
  Write("linked/config.pbtxt",
        "output [{ name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [4] "
        "label_filename: \"labels.txt\" }]");
  fs::create_symlink(root_ / "secret.txt", root_ / "linked" / "labels.txt");
  Write("inside/1/model.onnx", "identity FP32 -1 4");
  Write("inside/config.pbtxt",
        "output [{ name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [4] "
        "label_filename: \"labels.txt\" }]");
  Write("inside/data/names.txt", "cat\n");
  fs::create_symlink("data/names.txt", root_ / "inside" / "labels.txt");  // within: fine
  auto m = Load();
  ExpectReadyThenFailed(m->Index(), "inside", "linked", "outside the model's directory");
}

// The process's peak resident set so far.
long PeakRssKib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

// A config may give a dim the model leaves free any size: the implicit warm-up is sized first
// and, past what a warm-up may take, not run (a warning and the failure counter, as any failed
// implicit warm-up) instead of zero-filling 2 GiB. The model serves the shapes it can.
TEST_F(ModelRepositoryManagerTest, AnImplicitWarmupTooLargeToRunIsSkippedWithAWarning) {
  Write("wide/1/model.onnx", "identity FP32 -1 -1");
  Write("wide/config.pbtxt",
        "max_batch_size: 0 input [{ name: \"INPUT0\" data_type: TYPE_FP32 dims: [1, -1] }] "
        "output [{ name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [-1, -1] }]");
  Write("huge/1/model.onnx", "identity FP32 -1 -1");
  Write("huge/config.pbtxt",
        "max_batch_size: 0 input [{ name: \"INPUT0\" data_type: TYPE_FP32 dims: [1, 536870912] "
        "}] output [{ name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [-1, -1] }]");
  testing::RecordingLog log;
  const long peak_before_kib = PeakRssKib();
  auto m = Load();
  EXPECT_LT(PeakRssKib() - peak_before_kib, 256 * 1024);
  EXPECT_TRUE(m->AllReady());
  const auto warnings = log.Find(spdlog::level::warn, "default warm-up failed");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].message.find("input 'INPUT0' of shape [1,536870912] takes the default "
                                     "warm-up past the 1073741824 bytes"),
            std::string::npos)
      << warnings[0].message;
  TextExposition metrics;
  m->CollectMetrics(&metrics);
  EXPECT_NE(
      metrics.Text().find("harrier_model_warmup_failures_total{model=\"huge\",version=\"1\"} 1\n"),
      std::string::npos);
  EXPECT_NE(
      metrics.Text().find("harrier_model_warmup_failures_total{model=\"wide\",version=\"1\"} 0\n"),
      std::string::npos);
}

// A model_warmup the user configured is a promise about the model: its failure fails the load.
TEST_F(ModelRepositoryManagerTest, FailedConfiguredWarmupMakesTheVersionUnavailable) {
  Write("divides/1/model.onnx", "zero_fails FP32 -1 4");
  Write("divides/config.pbtxt",
        "model_warmup [{ name: \"zeros\" batch_size: 1 inputs { key: \"INPUT0\" value: "
        "{ data_type: TYPE_FP32 dims: [4] zero_data: true } } }]");
  Write("ok/1/model.onnx", "zero_fails FP32 -1 4");
  Write("ok/config.pbtxt",
        "model_warmup [{ name: \"random\" batch_size: 1 inputs { key: \"INPUT0\" value: "
        "{ data_type: TYPE_FP32 dims: [4] random_data: true } } }]");
  auto m = Load();
  auto rows = m->Index();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "divides");
  EXPECT_EQ(rows[0].state, ModelState::kUnavailable);
  EXPECT_NE(rows[0].reason.find("warm-up sample 'zeros'"), std::string::npos) << rows[0].reason;
  EXPECT_EQ(rows[1].name, "ok");
  EXPECT_EQ(rows[1].state, ModelState::kReady);
  TextExposition metrics;
  m->CollectMetrics(&metrics);
  EXPECT_NE(
      metrics.Text().find("harrier_model_warmup_failures_total{model=\"ok\",version=\"1\"} 0\n"),
      std::string::npos);
}

// Warm-up inputs are sized before anything is allocated or read: a shape past 1 GiB (or past
// int64), a file shorter than one sample, a BYTES file past 1 GiB (sparse: nothing is written,
// and nothing read), and inputs that together pass 1 GiB each fail the load by name. As in Triton,
// a file holds one sample (a longer one is read only that far) and a batch repeats it.
TEST_F(ModelRepositoryManagerTest, WarmupInputsAreSizedBeforeTheyAreAllocatedOrRead) {
  const auto warmup = [](const std::string& type, const std::string& dims, const std::string& data,
                         int batch = 1) {
    return "model_warmup [{ name: \"w\" batch_size: " + std::to_string(batch) +
           " inputs { key: \"INPUT0\" value: { data_type: " + type + " dims: " + dims + " " + data +
           " } } }]";
  };
  struct Case {
    std::string model;
    std::string config;
    std::string reason;  // empty: READY
  };
  const std::vector<Case> cases = {
      {"huge", warmup("TYPE_FP32", "[1073741824]", "zero_data: true"),
       "warm-up 'w', input 'INPUT0': shape [1,1073741824] takes more than the 1073741824 bytes"},
      {"overflowing", warmup("TYPE_FP32", "[4611686018427387904, 4]", "random_data: true"),
       "shape [1,4611686018427387904,4] takes more than"},
      {"short_file", warmup("TYPE_FP32", "[4]", "input_data_file: \"short\""),
       "input_data_file 'short' holds 10 bytes; one sample of [4] FP32 takes 16"},
      {"huge_bytes_file", warmup("TYPE_STRING", "[1]", "input_data_file: \"huge\""),
       "input_data_file 'huge': 1 x 2147483648 bytes, over the 1073741824"},
      {"missing_file", warmup("TYPE_FP32", "[4]", "input_data_file: \"none\""),
       "input_data_file 'none': No such file or directory"},
      {"right_file", warmup("TYPE_FP32", "[4]", "input_data_file: \"right\""), ""},
      // A link out of the model's directory: fed the model any file the server can read.
      {"linked_file", warmup("TYPE_FP32", "[4]", "input_data_file: \"linked\""),
       "input_data_file 'linked': the file is outside the model's directory"},
      {"long_file", warmup("TYPE_FP32", "[4]", "input_data_file: \"long\""), ""},
      {"batch_of_one_sample", warmup("TYPE_FP32", "[4]", "input_data_file: \"right\"", 3), ""},
      // 768 MiB each: either alone fits, together they do not, and the first is not allocated
      // before the second is refused (a shape, or a file's size).
      {"two_large_samples",
       "model_warmup [{ name: \"a\" batch_size: 1 inputs { key: \"INPUT0\" value: { "
       "data_type: TYPE_FP32 dims: [201326592] zero_data: true } } }, { name: \"b\" "
       "batch_size: 1 inputs { key: \"INPUT0\" value: { data_type: TYPE_FP32 dims: "
       "[201326592] random_data: true } } }]",
       "warm-up 'b', input 'INPUT0': shape [1,201326592] takes more than the 268435456 bytes "
       "left of the 1073741824 a model's warm-up may take in all"},
      {"large_sample_then_file",
       "model_warmup [{ name: \"a\" batch_size: 1 inputs { key: \"INPUT0\" value: { "
       "data_type: TYPE_FP32 dims: [201326592] zero_data: true } } }, { name: \"b\" "
       "batch_size: 1 inputs { key: \"INPUT0\" value: { data_type: TYPE_STRING dims: [1] "
       "input_data_file: \"huge\" } } }]",
       "warm-up 'b', input 'INPUT0': input_data_file 'huge': 1 x 805306368 bytes, over the "
       "268435456 bytes left of the 1073741824 a model's warm-up may take in all"},
  };
  for (const Case& c : cases) {
    Write(c.model + "/1/model.onnx", "identity FP32 -1 4");
    Write(c.model + "/config.pbtxt", "max_batch_size: 4\n" + c.config);
  }
  Write("short_file/warmup/short", std::string(10, 'x'));
  Write("huge_bytes_file/warmup/huge", "");
  fs::resize_file(root_ / "huge_bytes_file/warmup/huge", uint64_t{2} << 30);
  Write("right_file/warmup/right", std::string(16, '\0'));
  Write("secret", std::string(16, 'x'));  // in the repository's root, outside every model
  Write("linked_file/warmup/.keep", "");
  fs::create_symlink(root_ / "secret", root_ / "linked_file/warmup/linked");
  Write("long_file/warmup/long", std::string(1000, '\0'));
  Write("batch_of_one_sample/warmup/right", std::string(16, '\0'));
  Write("large_sample_then_file/warmup/huge", "");
  fs::resize_file(root_ / "large_sample_then_file/warmup/huge", uint64_t{768} << 20);
  const long peak_before_kib = PeakRssKib();
  auto m = Load();
  // Nothing refused was allocated: 768 MiB zero-filled would have raised the process's peak.
  EXPECT_LT(PeakRssKib() - peak_before_kib, 256 * 1024);
  std::map<std::string, ModelVersionState> rows;
  for (const ModelVersionState& row : m->Index()) rows[row.name] = row;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model);
    ASSERT_EQ(rows.count(c.model), 1u);
    if (c.reason.empty()) {
      EXPECT_EQ(rows[c.model].state, ModelState::kReady) << rows[c.model].reason;
    } else {
      EXPECT_EQ(rows[c.model].state, ModelState::kUnavailable);
      EXPECT_NE(rows[c.model].reason.find(c.reason), std::string::npos) << rows[c.model].reason;
    }
  }
}

TEST_F(ModelRepositoryManagerTest, ValidationErrorsAndStatistics) {
  Write("m/1/model.onnx", "identity FP32 -1 4");
  auto m = Load();
  auto s = m->Get("m", std::nullopt);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(InferSync(**s, Fp32Request({1, 2, 3}, {1, 3})).status().code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(InferSync(**s, Fp32Request({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4})).ok());
  auto stats = m->Stats("m", std::nullopt);
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->size(), 1u);
  const ModelVersionStats& st = (*stats)[0];
  EXPECT_EQ(st.success.count, 1u);
  EXPECT_EQ(st.fail.count, 1u);
  EXPECT_EQ(st.inference_count, 2u);  // a batch of two
  EXPECT_EQ(st.execution_count, 1u);
  EXPECT_EQ(st.compute_infer.count, 1u);
  EXPECT_GT(st.last_inference_ms, 0u);
  EXPECT_EQ(m->Stats("zzz", std::nullopt).status().code(), StatusCode::kNotFound);
}

TEST_F(ModelRepositoryManagerTest, DashboardVersionsReadTheMetricsOfEveryIndexRow) {
  Write("bad/1/model.onnx", "garbage");
  Write("m/1/model.onnx", "identity FP32 -1 4");
  auto m = Load();
  auto s = m->Get("m", std::nullopt);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(InferSync(**s, Fp32Request({1, 2, 3, 4}, {1, 4})).ok());
  ASSERT_TRUE(InferSync(**s, Fp32Request({1, 2, 3, 4}, {1, 4})).ok());
  EXPECT_FALSE(InferSync(**s, Fp32Request({1, 2, 3}, {1, 3})).ok());

  // A request's total time (and its in-flight slot) is recorded just after its callback has
  // run, so the answer InferSync waits for can come a moment before the figures: wait for them.
  std::vector<DashboardVersion> rows = m->DashboardVersions();
  for (auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
       rows.size() == 2 && (rows[1].request_duration.count() < 2 || rows[1].in_flight != 0) &&
       std::chrono::steady_clock::now() < give_up;) {
    std::this_thread::yield();
    rows = m->DashboardVersions();
  }
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].state.name, "bad");
  EXPECT_EQ(rows[0].state.state, ModelState::kUnavailable);
  EXPECT_FALSE(rows[0].state.reason.empty());
  EXPECT_FALSE(rows[0].loaded);
  const DashboardVersion& v = rows[1];
  EXPECT_EQ(v.state.name, "m");
  EXPECT_EQ(v.state.version, 1);
  EXPECT_EQ(v.state.state, ModelState::kReady);
  EXPECT_TRUE(v.loaded);
  EXPECT_EQ(v.success_count, 2u);
  EXPECT_EQ(v.failure_count, 1u);
  EXPECT_EQ(v.queue_depth, 0u);
  EXPECT_EQ(v.in_flight, 0);
  EXPECT_EQ(v.request_duration.count(), 2u);  // successes only, like the histogram
}

TEST_F(ModelRepositoryManagerTest, DynamicBatchingConfigReachesTheScheduler) {
  Write("m/1/model.onnx", "identity FP32 -1 4");
  Write("m/config.pbtxt",
        "max_batch_size: 8\n"
        "dynamic_batching { max_queue_delay_microseconds: 100 priority_levels: 2\n"
        "  default_priority_level: 2\n"
        "  default_queue_policy { max_queue_size: 4 } }\n"
        "parameters { key: \"harrier.batching.target_p99_us\" value: { string_value: \"5000\" } }");
  Write("bad/1/model.onnx", "identity FP32 -1 4");
  Write("bad/config.pbtxt",
        "parameters { key: \"harrier.batching.target_p99_us\" value: { string_value: \"5ms\" } }");
  auto m = Load();
  auto s = m->Get("m", std::nullopt);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto r = Fp32Request({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  r->priority = 1;
  auto resp = InferSync(**s, std::move(r));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->outputs[0].shape, (Shape{2, 4}));
  auto stats = m->Stats("m", std::nullopt);
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ((*stats)[0].batch_stats.size(), 1u);
  EXPECT_EQ((*stats)[0].batch_stats[0].batch_size, 2u);
  auto bad = m->Get("bad", std::nullopt);
  EXPECT_EQ(bad.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(bad.status().message().find("harrier.batching.target_p99_us"), std::string::npos)
      << bad.status().message();
}

TEST_F(ModelRepositoryManagerTest, ShutdownRefusesNewWork) {
  Write("m/1/model.onnx", "identity FP32 -1 4");
  auto m = Load();
  auto s = m->Get("m", std::nullopt);
  ASSERT_TRUE(s.ok());
  m->Shutdown();
  EXPECT_FALSE(m->AllReady());
  EXPECT_EQ(m->Get("m", std::nullopt).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(InferSync(**s, Fp32Request({1, 2, 3, 4}, {1, 4})).status().code(),
            StatusCode::kUnavailable);
}

}  // namespace
}  // namespace harrier

namespace harrier {
namespace {

TEST(ModelRepositoryManagerPinningTest, PinnedInstancesLoadAndServe) {
  namespace fs = std::filesystem;
  fs::path root = fs::temp_directory_path() / ("harrier-pin-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "m" / "1");
  std::ofstream(root / "m" / "1" / "model.onnx") << "identity FP32 -1 4";
  std::ofstream(root / "m" / "config.pbtxt") << "instance_group [{ count: 3 kind: KIND_CPU }]";
  testing::FakeBackend backend;
  BackendRegistry backends;
  backends.AddTensorBackend(&backend);
  ModelRepositoryManager::Options options;
  options.repository_path = root.string();
  options.backends = &backends;
  options.usable_cores = 1;
  options.pin_instance_workers = true;
  auto m = ModelRepositoryManager::Create(options);
  ASSERT_TRUE(m.ok());
  (*m)->LoadAll();
  EXPECT_TRUE((*m)->AllReady());
  auto served = (*m)->Get("m", std::nullopt);
  ASSERT_TRUE(served.ok());
  auto request = testing::Fp32InferenceRequest({1, 2, 3, 4}, {1, 4});
  std::promise<StatusOr<InferenceResponse>> p;
  (*served)->Infer(std::move(request),
                   [&](StatusOr<InferenceResponse> r) { p.set_value(std::move(r)); });
  EXPECT_TRUE(p.get_future().get().ok());
  (*m)->Shutdown();
  fs::remove_all(root);
}

// ---- Model control (docs/model-lifecycle.md) ------------------------------------------------

// Calls LoadModel / UnloadModel and waits for their answer.
Status Control(ModelRepositoryManager& m, bool load, const std::string& name,
               ModelLoadOptions options = {}) {
  std::promise<Status> p;
  auto f = p.get_future();
  auto done = [&p](Status s) { p.set_value(std::move(s)); };
  if (load) {
    m.LoadModel(name, std::move(options), done);
  } else {
    m.UnloadModel(name, done);
  }
  return f.get();
}

// The instance serving `name` version `version` now, to compare with a later one (null when
// none serves); the handle is let go at once, so that it holds up no retirement.
const ServableModel* ServingNow(ModelRepositoryManager& m, const std::string& name,
                                int64_t version) {
  auto handle = m.Get(name, version);
  return handle.ok() ? handle->get() : nullptr;
}

// Waits (up to 5 s) until `pred` holds; the lifecycle thread applies polls and drains.
bool Eventually(const std::function<bool()>& pred) {
  for (int i = 0; i < 500; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

TEST_F(ModelRepositoryManagerTest, LoadAndUnloadNeedExplicitMode) {
  Write("a/1/model.onnx", "identity FP32 -1 4");
  auto m = Load();
  const Status load = Control(*m, true, "a");
  EXPECT_EQ(load.code(), StatusCode::kUnavailable);
  EXPECT_NE(load.message().find("explicit model load / unload is not allowed"), std::string::npos)
      << load.ToString();
  EXPECT_EQ(Control(*m, false, "a").code(), StatusCode::kUnavailable);
  EXPECT_TRUE(m->Get("a", std::nullopt).ok());  // changed nothing
}

TEST_F(ModelRepositoryManagerTest, ExplicitModeLoadsOnlyTheNamedModelsThenOnRequest) {
  Write("a/1/model.onnx", "identity FP32 -1 4");
  Write("b/1/model.onnx", "identity FP32 -1 4");
  auto manager = Explicit({"a"});
  auto& m = *manager;
  EXPECT_TRUE(m.Get("a", std::nullopt).ok());
  EXPECT_EQ(m.Get("b", std::nullopt).status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(m.AllReady());  // an unloaded model is not expected to serve
  auto rows = m.Index();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].state, ModelState::kUnavailable);
  EXPECT_EQ(rows[1].reason, "unloaded");
  // A model never loaded has no traffic controller yet: it reads as one without a policy.
  EXPECT_EQ(*m.TrafficJson("b"),
            R"({"model":"b","policy":null,"state":null,"rollbacks":0,"last_rollback":null,)"
            R"("shadow":{}})");

  ASSERT_TRUE(Control(m, true, "b").ok());
  EXPECT_TRUE(m.Get("b", std::nullopt).ok());
  EXPECT_EQ(Control(m, true, "nope").code(), StatusCode::kNotFound);

  // Unload: out of rotation at once; a request holding a handle still finishes.
  auto held = m.Get("a", std::nullopt);
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(Control(m, false, "a").ok());
  const Status gone = m.Get("a", std::nullopt).status();
  EXPECT_EQ(gone.code(), StatusCode::kUnavailable);
  EXPECT_NE(gone.message().find("has no available versions"), std::string::npos);
  auto answer = InferSync(**held, Fp32Request({1, 2, 3, 4}, {1, 4}));
  EXPECT_TRUE(answer.ok()) << answer.status().ToString();
  held->reset();
  EXPECT_TRUE(Eventually([&] {
    auto r = m.Index();
    return r[0].state == ModelState::kUnavailable && r[0].reason == "unloaded";
  }));
  EXPECT_TRUE(m.AllReady());
  ASSERT_TRUE(Control(m, true, "a").ok());  // and back
  EXPECT_TRUE(m.Get("a", std::nullopt).ok());
}

// A refused load of a model nobody serves (unloaded) changes nothing: it stays unloaded, with
// its rows, and the server stays ready. A failed entry replaced it, and one mistyped load made
// the whole server unready until the model was unloaded again (probe 28, F4).
// An unload asked for while the model's load is warming up stops the warm-up between runs: the
// unload waited behind the load (one model's tasks run in order), however many runs a
// model_warmup asks for (probe 29, H7). The load fails, saying why; the unload goes through.
TEST_F(ModelRepositoryManagerTest, AnUnloadStopsTheWarmupOfTheModelsLoadUnderWay) {
  Write("w/1/model.onnx", "identity FP32 -1 4");
  Write("w/config.pbtxt",
        "model_warmup [{ name: \"many\" batch_size: 1 count: 10000 inputs { key: \"INPUT0\" "
        "value: { data_type: TYPE_FP32 dims: [4] zero_data: true } } }]");
  std::mutex mu;
  std::condition_variable cv;
  bool unload_asked = false;
  backend_.on_run = [&] {
    if (backend_.runs.load() != 5) return;  // the fifth run waits for the unload to be asked
    std::unique_lock lock(mu);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return unload_asked; });
  };
  auto m = Explicit();
  std::promise<Status> loaded;
  m->LoadModel("w", {}, [&](Status s) { loaded.set_value(std::move(s)); });
  ASSERT_TRUE(Eventually([&] { return backend_.runs.load() >= 5; }));
  std::promise<Status> unloaded;
  m->UnloadModel("w", [&](Status s) { unloaded.set_value(std::move(s)); });
  {
    std::lock_guard lock(mu);
    unload_asked = true;
  }
  cv.notify_all();
  const Status load = loaded.get_future().get();
  EXPECT_EQ(load.code(), StatusCode::kUnavailable) << load.ToString();
  EXPECT_NE(load.message().find("an unload of the model was asked for"), std::string::npos)
      << load.message();
  EXPECT_TRUE(unloaded.get_future().get().ok());
  EXPECT_LT(backend_.runs.load(), 100);
  backend_.on_run = nullptr;
  // The next load is not stopped by the unload that came before it.
  EXPECT_TRUE(Control(*m, true, "w").ok());
  EXPECT_TRUE(m->Get("w", 1).ok());
}

TEST_F(ModelRepositoryManagerTest, ARefusedLoadOfAnUnloadedModelLeavesItUnloadedAndTheServerReady) {
  Write("a/1/model.onnx", "identity FP32 -1 4");
  auto manager = Explicit({"a"});
  auto& m = *manager;
  ASSERT_TRUE(Control(m, false, "a").ok());
  ASSERT_TRUE(Eventually([&] { return m.Index()[0].reason == "unloaded"; }));
  ASSERT_TRUE(m.AllReady());
  ModelLoadOptions bad;
  bad.config_json = R"({"version_policy": {"specific": {"versions": [9]}}})";
  const Status refused = Control(m, true, "a", bad);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused.ToString();  // the request's
  EXPECT_NE(refused.message().find("version(s) 9"), std::string::npos) << refused.ToString();
  EXPECT_TRUE(m.AllReady());
  auto rows = m.Index();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].version, 1);
  EXPECT_EQ(rows[0].reason, "unloaded");
  ASSERT_TRUE(Control(m, true, "a").ok());  // a good load still loads it
  EXPECT_TRUE(m.Get("a", std::nullopt).ok());
}

TEST_F(ModelRepositoryManagerTest, AFailedReloadLeavesTheServingVersionServing) {
  Write("a/1/model.onnx", "identity FP32 -1 4");
  auto manager = Explicit({"*"});
  auto& m = *manager;
  auto before = m.Get("a", 1);
  ASSERT_TRUE(before.ok());
  Write("a/1/model.onnx", "garbage, half copied");
  const Status s = Control(m, true, "a");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("failed to load 'a'"), std::string::npos) << s.ToString();
  auto after = m.Get("a", 1);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->get(), before->get());  // the same instance serves
  EXPECT_TRUE(InferSync(**after, Fp32Request({1, 2, 3, 4}, {1, 4})).ok());
}

TEST_F(ModelRepositoryManagerTest, ALoadThatDoesNotFitIsAnInvalidArgumentNotARetry) {
  Write("a/1/model.onnx", "too_big");
  auto manager = Explicit();
  auto& m = *manager;
  const Status s = Control(m, true, "a");
  // The engine says RESOURCE_EXHAUSTED; a load answers 400 as Triton does, not a 429 to retry.
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("failed to load 'a'"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("not enough memory for the model"), std::string::npos) << s.ToString();
}

// A config override that fails is named as the request's parameters.config, not as the
// repository's config.pbtxt it replaced.
TEST_F(ModelRepositoryManagerTest, AConfigOverridesFailureNamesTheOverrideNotTheFile) {
  Write("a/config.pbtxt", "max_batch_size: 2\n");
  Write("a/1/model.onnx", "identity FP32 -1 4");
  auto manager = Explicit();
  ModelLoadOptions escaping;
  escaping.config_json = R"({"default_model_filename": "../x"})";
  const Status s = Control(*manager, true, "a", escaping);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("parameters.config"), std::string::npos) << s.ToString();
  EXPECT_EQ(s.message().find("config.pbtxt"), std::string::npos) << s.ToString();
}

// A load refused for its own config override changed nothing in the repository: its answer
// says why, and the index beside the serving versions says nothing (probe 33).
TEST_F(ModelRepositoryManagerTest, AnOverridesFailureLeavesTheServingRowsReasonEmpty) {
  Write("a/1/model.onnx", "identity FP32 -1 4");
  auto manager = Explicit({"a"});
  ModelLoadOptions missing;
  missing.config_json = R"({"version_policy": {"specific": {"versions": [9]}}})";
  EXPECT_EQ(Control(*manager, true, "a", missing).code(), StatusCode::kInvalidArgument);
  ModelLoadOptions unloadable;
  unloadable.config_json = R"({"max_batch_size": 4, "default_model_filename": "none.onnx"})";
  EXPECT_FALSE(Control(*manager, true, "a", unloadable).ok());
  auto rows = manager->Index();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].state, ModelState::kReady);
  EXPECT_EQ(rows[0].reason, "");
}

TEST_F(ModelRepositoryManagerTest, AConfigOverrideReplacesConfigPbtxtForThatLoad) {
  Write("a/1/model.onnx", "identity FP32 -1 4");
  auto manager = Explicit();
  auto& m = *manager;
  ModelLoadOptions bad;
  bad.config_json = R"({"max_batch_size": "many"})";
  EXPECT_EQ(Control(m, true, "a", bad).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.Get("a", std::nullopt).status().code(), StatusCode::kUnavailable);
  ModelLoadOptions good;
  good.config_json = R"({"max_batch_size": 4})";
  ASSERT_TRUE(Control(m, true, "a", good).ok());
  auto a = m.Get("a", std::nullopt);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->max_batch_size(), 4);
}

// default_model_filename is joined to the version's directory: a config override cannot point
// it anywhere else (outside the repository, or at another model's file), and a model file that
// is no regular file fails at once (a FIFO would hold the load and its thread forever).
TEST_F(ModelRepositoryManagerTest, TheModelFileStaysInTheVersionsDirectory) {
  Write("a/1/model.onnx", "identity FP32 -1 4");
  Write("b/1/model.onnx", "identity FP32 -1 4");
  Write("b/1/other.onnx", "identity FP32 -1 4");
  auto manager = Explicit();
  auto& m = *manager;
  for (const char* name : {"../../b/1/model.onnx", "..", ".", "/etc/passwd", "1/model.onnx"}) {
    ModelLoadOptions o;
    o.config_json = std::string(R"({"default_model_filename": ")") + name + "\"}";
    const Status s = Control(m, true, "a", o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << name << ": " << s.ToString();
    EXPECT_NE(s.message().find("default_model_filename must name a file in the version's "
                               "directory"),
              std::string::npos)
        << s.ToString();
    EXPECT_EQ(m.Get("a", std::nullopt).status().code(), StatusCode::kUnavailable) << name;
  }
  ModelLoadOptions other;
  other.config_json = R"({"default_model_filename": "other.onnx"})";
  EXPECT_TRUE(Control(m, true, "b", other).ok());

  fs::create_directories(root_ / "c/1");
  ASSERT_EQ(::mkfifo((root_ / "c/1/model.onnx").c_str(), 0600), 0);
  const Status fifo = Control(m, true, "c");
  EXPECT_EQ(fifo.code(), StatusCode::kInvalidArgument) << fifo.ToString();
  EXPECT_NE(fifo.message().find("is not a regular file"), std::string::npos) << fifo.ToString();
}

// File overrides (Triton's "file:<version>/<name>" load parameters): the model loads from a
// private directory under Options::override_parent_directory, which goes with its versions.
class FileOverrideTest : public ModelRepositoryManagerTest {
 protected:
  void SetUp() override {
    ModelRepositoryManagerTest::SetUp();
    overrides_ = root_.parent_path() / (root_.filename().string() + "-overrides");
    fs::remove_all(overrides_);
    fs::create_directories(overrides_);
  }
  void TearDown() override {
    fs::remove_all(overrides_);
    ModelRepositoryManagerTest::TearDown();
  }
  std::unique_ptr<ModelRepositoryManager> Explicit(std::vector<std::string> startup = {}) {
    return ModelRepositoryManagerTest::Explicit(std::move(startup), overrides_.string());
  }
  static ModelLoadOptions WithFiles(std::vector<ModelFileOverride> files,
                                    std::optional<std::string> config = "{}") {
    ModelLoadOptions o;
    o.config_json = std::move(config);
    o.files = std::move(files);
    return o;
  }
  // The override directories that exist now.
  std::vector<fs::path> Written() const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(overrides_)) out.push_back(e.path());
    return out;
  }
  static int64_t InputWidth(ModelRepositoryManager& m, const std::string& name) {
    auto md = m.Metadata(name, std::nullopt);
    EXPECT_TRUE(md.ok()) << md.status().ToString();
    return md.ok() ? md->inputs.at(0).dims.back() : -1;
  }

  fs::path overrides_;
};

TEST_F(FileOverrideTest, LoadsAModelUnderANewNameFromItsFilesAndUnloadRemovesThem) {
  auto m = Explicit();
  ASSERT_TRUE(Control(*m, true, "fresh", WithFiles({{"1/model.onnx", "identity FP32 -1 4"}})).ok());
  auto fresh = m->Get("fresh", std::nullopt);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_TRUE(InferSync(**fresh, Fp32Request({1, 2, 3, 4}, {1, 4})).ok());
  fresh->reset();
  const auto written = Written();
  ASSERT_EQ(written.size(), 1u);
  EXPECT_TRUE(fs::is_regular_file(written[0] / "1" / "model.onnx"));
  EXPECT_TRUE(m->AllReady());

  const size_t rows = m->Index().size();
  ASSERT_TRUE(Control(*m, false, "fresh").ok());
  EXPECT_TRUE(Eventually([&] { return Written().empty(); }));
  // Not in the repository: once unloaded it is forgotten (index rows and metrics go; each
  // name ever loaded from files stayed for good, probe 28), and a plain load has nothing to
  // load it from.
  EXPECT_TRUE(Eventually([&] { return m->Index().size() == rows - 1; }));
  EXPECT_EQ(m->Get("fresh", std::nullopt).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Control(*m, true, "fresh").code(), StatusCode::kNotFound);
  EXPECT_TRUE(m->AllReady());
}

// A load with files names a model that need not exist: the name still has to be one a
// repository directory could have (it goes into log lines, the index and metrics as it is).
TEST_F(FileOverrideTest, ANameNoDirectoryCouldHaveIsRefusedAndNothingIsWritten) {
  auto m = Explicit();
  for (const std::string& name :
       {std::string("q\"} 1\nfake_metric{a=\""), std::string("a/b"), std::string(".."),
        std::string(".hidden"), std::string("nul\0byte", 8), std::string(300, 'x'),
        std::string()}) {
    const Status s = Control(*m, true, name, WithFiles({{"1/model.onnx", "identity FP32 -1 4"}}));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("a model name is one a repository directory could have"),
              std::string::npos)
        << s.ToString();
  }
  EXPECT_TRUE(Written().empty());
  EXPECT_TRUE(m->Index().empty());
  EXPECT_TRUE(
      Control(*m, true, "sp ace", WithFiles({{"1/model.onnx", "identity FP32 -1 4"}})).ok());
}

TEST_F(FileOverrideTest, ReplacesTheRepositoryVersionThenAPlainLoadGoesBackToTheRepository) {
  Write("a/1/model.onnx", "identity FP32 -1 4");
  auto m = Explicit({"a"});
  EXPECT_EQ(InputWidth(*m, "a"), 4);
  ASSERT_TRUE(Control(*m, true, "a", WithFiles({{"1/model.onnx", "identity FP32 -1 8"}})).ok());
  EXPECT_EQ(InputWidth(*m, "a"), 8);
  ASSERT_EQ(Written().size(), 1u);

  // A second load with files replaces the first directory with its own.
  const fs::path first = Written()[0];
  ASSERT_TRUE(Control(*m, true, "a", WithFiles({{"1/model.onnx", "identity FP32 -1 6"}})).ok());
  EXPECT_EQ(InputWidth(*m, "a"), 6);
  ASSERT_EQ(Written().size(), 1u);
  EXPECT_NE(Written()[0], first);

  // Without files: from the repository again (Triton's behaviour), the directory removed.
  ASSERT_TRUE(Control(*m, true, "a").ok());
  EXPECT_EQ(InputWidth(*m, "a"), 4);
  EXPECT_TRUE(Written().empty());
}

TEST_F(FileOverrideTest, BadRequestsChangeNothingAndWriteNothing) {
  Write("a/1/model.onnx", "identity FP32 -1 4");
  auto m = Explicit({"a"});
  auto before = m->Get("a", std::nullopt);
  ASSERT_TRUE(before.ok());
  const Status no_config =
      Control(*m, true, "a", WithFiles({{"1/model.onnx", "identity FP32 -1 8"}}, std::nullopt));
  EXPECT_EQ(no_config.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_config.message().find("parameters.config must be given"), std::string::npos)
      << no_config.ToString();
  EXPECT_EQ(Control(*m, true, "a", WithFiles({{"../1/model.onnx", "x"}})).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Control(*m, true, "a", WithFiles({{"1/model.onnx", "x"}}, R"({"max_batch_size": "x"})"))
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(Written().empty());
  EXPECT_TRUE(fs::is_empty(overrides_));
  EXPECT_EQ(m->Get("a", std::nullopt)->get(), before->get());
}

TEST_F(FileOverrideTest, AFailedLoadFromFilesLeavesTheServingVersionAndNoDirectory) {
  Write("a/1/model.onnx", "identity FP32 -1 4");
  auto m = Explicit({"a"});
  auto before = m->Get("a", 1);
  ASSERT_TRUE(before.ok());
  const Status s = Control(*m, true, "a", WithFiles({{"1/model.onnx", "garbage"}}));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("failed to load 'a'"), std::string::npos) << s.ToString();
  EXPECT_EQ(s.message().find(overrides_.string()), std::string::npos)
      << "the private directory is not shown to clients: " << s.ToString();
  EXPECT_EQ(m->Get("a", 1)->get(), before->get());
  EXPECT_TRUE(Written().empty());
  // A new version that fails: the index names it by its file, version 1 goes on serving.
  EXPECT_FALSE(Control(*m, true, "a", WithFiles({{"2/model.onnx", "garbage"}})).ok());
  EXPECT_EQ(m->Get("a", 1)->get(), before->get());
  const auto rows = m->Index();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].version, 2);
  EXPECT_EQ(rows[1].state, ModelState::kUnavailable);
  EXPECT_EQ(rows[1].reason.rfind("file:2/model.onnx", 0), 0u) << rows[1].reason;
  EXPECT_TRUE(Written().empty());
  // Dropped first: the reload below retires the version it holds, which would wait the whole
  // unload_timeout (30 s) for this handle.
  before->reset();
  ASSERT_TRUE(Control(*m, true, "a").ok());  // back to the repository: version 1 only
  // Under a new name: no index row is left, and the server stays ready.
  EXPECT_FALSE(Control(*m, true, "new", WithFiles({{"1/model.onnx", "garbage"}})).ok());
  EXPECT_EQ(m->Index().size(), 1u);
  EXPECT_TRUE(m->AllReady());
  EXPECT_EQ(m->Get("new", std::nullopt).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Written().empty());
}

TEST_F(FileOverrideTest, ShutdownRemovesTheDirectories) {
  auto m = Explicit();
  ASSERT_TRUE(Control(*m, true, "x", WithFiles({{"1/model.onnx", "identity FP32 -1 4"}})).ok());
  ASSERT_TRUE(Control(*m, true, "y", WithFiles({{"2/model.onnx", "identity FP32 -1 4"}})).ok());
  EXPECT_EQ(Written().size(), 2u);
  EXPECT_TRUE(m->Get("y", 2).ok());
  m->Shutdown();
  EXPECT_TRUE(Written().empty());
}

TEST_F(ModelRepositoryManagerTest, PollAppliesNewChangedAndRemovedVersionsAndModels) {
  Write("a/1/model.onnx", "identity FP32 -1 4");
  auto polled_manager = Polled();
  auto& m = *polled_manager;
  const ServableModel* const first = ServingNow(m, "a", 1);
  ASSERT_NE(first, nullptr);

  // Nothing changed: the same instance keeps serving.
  m.PollNow();
  Write("b/1/model.onnx", "identity FP32 -1 4");  // a new model
  m.PollNow();
  ASSERT_TRUE(Eventually([&] { return m.Get("b", 1).ok(); }));
  EXPECT_EQ(m.Get("a", 1)->get(), first);

  // A new version: the latest is 2 now (default policy), version 1 retires.
  Write("a/2/model.onnx", "identity FP32 -1 4");
  m.PollNow();
  ASSERT_TRUE(Eventually([&] {
    auto a = m.Get("a", std::nullopt);
    return a.ok() && (*a)->version() == 2;
  }));
  EXPECT_TRUE(Eventually([&] { return m.Get("a", 1).status().code() == StatusCode::kNotFound; }));

  // A changed config reloads it; a removed model leaves the index.
  const ServableModel* const before = ServingNow(m, "a", 2);
  ASSERT_NE(before, nullptr);
  Write("a/config.pbtxt", "max_batch_size: 8\n");
  std::filesystem::remove_all(root_ / "b");
  m.PollNow();
  EXPECT_TRUE(Eventually([&] {
    auto a = m.Get("a", 2);
    return a.ok() && a->get() != before && (*a)->max_batch_size() == 8;
  }));
  EXPECT_TRUE(Eventually(
      [&] { return m.Get("b", std::nullopt).status().code() == StatusCode::kNotFound; }));
  // A corrupt new version changes nothing that serves.
  Write("a/3/model.onnx", "garbage");
  m.PollNow();
  EXPECT_TRUE(Eventually([&] {
    for (const auto& row : m.Index())
      if (row.name == "a" && row.version == 3) return row.state == ModelState::kUnavailable;
    return false;
  }));
  auto serving = m.Get("a", std::nullopt);
  ASSERT_TRUE(serving.ok());
  EXPECT_EQ((*serving)->version(), 2);

  // Rolled back (its directory removed): the failed version leaves the index, and the server
  // is ready again (it stayed 503 until a config.pbtxt edit).
  EXPECT_FALSE(m.AllReady());
  std::filesystem::remove_all(root_ / "a/3");
  m.PollNow();
  EXPECT_TRUE(Eventually([&] {
    for (const auto& row : m.Index())
      if (row.name == "a" && row.version == 3) return false;
    return true;
  }));
  EXPECT_TRUE(m.AllReady());
}

// A poll meets each failure once: a serving version's reload that failed is not tried again
// from the same files (each try was a whole load), and a broken config.pbtxt or directory is
// logged once, not every poll.
TEST_F(ModelRepositoryManagerTest, APollDoesNotRetryOrRelogTheSameFailure) {
  Write("a/1/model.onnx", "identity FP32 -1 4");
  Write("b/1/model.onnx", "identity FP32 -1 4");
  auto polled_manager = Polled();
  auto& m = *polled_manager;
  ASSERT_TRUE(m.Get("a", 1).ok());
  testing::RecordingLog log;
  Write("a/1/model.onnx", "garbage but longer");  // the serving version's file, broken
  Write("b/config.pbtxt", "max_batch_size: [");   // a config that does not parse
  fs::create_directory_symlink(root_ / "loop", root_ / "loop");
  // Each poll's parts take a millisecond here; 300 ms leaves them time to finish.
  auto polled = [&](int times, size_t logged) {
    for (int i = 0; i < times; ++i) {
      m.PollNow();
      EXPECT_TRUE(Eventually([&] {
        return log.Find(spdlog::level::err, "version 1 failed to reload").size() >= logged &&
               log.Find(spdlog::level::err, "model 'b' was not reloaded").size() >= logged;
      }));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  };
  polled(3, 1);
  EXPECT_EQ(log.Find(spdlog::level::err, "version 1 failed to reload").size(), 1u);
  EXPECT_EQ(log.Find(spdlog::level::err, "model 'b' was not reloaded").size(), 1u);
  EXPECT_EQ(log.Find(spdlog::level::err, "model 'loop' is UNAVAILABLE").size(), 1u);
  EXPECT_TRUE(m.Get("a", 1).ok());  // the loaded one goes on serving
  EXPECT_TRUE(m.Get("b", 1).ok());
  // The index says so beside READY: the failures were only in the log (probe 29).
  auto rows = [&] {
    std::map<std::string, ModelVersionState> by_name;
    for (const ModelVersionState& row : m.Index()) by_name[row.name] = row;
    return by_name;
  };
  EXPECT_EQ(rows()["a"].state, ModelState::kReady);
  EXPECT_THAT(rows()["a"].reason,
              ::testing::StartsWith("serving what was loaded before; its new files failed"));
  EXPECT_EQ(rows()["b"].state, ModelState::kReady);
  EXPECT_THAT(rows()["b"].reason,
              ::testing::StartsWith("serving what was loaded before; the model's new content "
                                    "failed to load: "));

  // Changed again: tried (and logged) again.
  Write("a/1/model.onnx", "garbage, changed again");
  Write("b/config.pbtxt", "max_batch_size: -");
  polled(2, 2);
  EXPECT_EQ(log.Find(spdlog::level::err, "version 1 failed to reload").size(), 2u);
  EXPECT_EQ(log.Find(spdlog::level::err, "model 'b' was not reloaded").size(), 2u);

  // Back to what serves: nothing to say any more.
  Write("a/1/model.onnx", "identity FP32 -1 4");
  fs::remove(root_ / "b/config.pbtxt");
  m.PollNow();
  EXPECT_TRUE(Eventually([&] { return rows()["a"].reason.empty() && rows()["b"].reason.empty(); }))
      << rows()["a"].reason << " / " << rows()["b"].reason;

  // The repository itself cannot be listed: said once while it lasts (probe 68: a line every
  // poll), and when it ends; the models go on serving.
  const fs::path away = root_.string() + ".away";
  fs::rename(root_, away);
  for (int i = 0; i < 3; ++i) m.PollNow();
  EXPECT_TRUE(
      Eventually([&] { return !log.Find(spdlog::level::err, "model repository poll").empty(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(log.Find(spdlog::level::err, "model repository poll").size(), 1u);
  EXPECT_TRUE(m.Get("a", 1).ok());
  fs::rename(away, root_);
  m.PollNow();
  EXPECT_TRUE(Eventually([&] {
    return !log.Find(spdlog::level::info, "the repository can be listed again").empty();
  }));
}

// ---- Traffic between versions (docs/routing.md) ----------------------------------------------

TEST_F(ModelRepositoryManagerTest, TrafficJsonInTheRepositoryRoutesAndTheApiReplacesIt) {
  Write("a/config.pbtxt", "version_policy: { all: {} }\n");
  Write("a/1/model.onnx", "identity FP32 -1 4");
  Write("a/2/model.onnx", "identity FP32 -1 4");
  Write("a/traffic.json", R"({"weights": {"1": 1, "2": 0}})");
  auto m = Load();
  auto route = [&](ModelManager::RequestHeaders headers = {}) {
    auto r = m->Route("a", std::nullopt, headers);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? (*r)->version() : -1;
  };
  for (int i = 0; i < 50; ++i) EXPECT_EQ(route(), 1);  // not the latest: the policy's
  EXPECT_EQ(route({{"x-harrier-model-version", "2"}}), 2);
  EXPECT_EQ(m->Route("a", std::nullopt, {{"x-harrier-model-version", "two"}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*m->Route("a", 2, {}))->version(), 2);  // the URL's version always wins
  auto json = m->TrafficJson("a");
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find(R"("weights":{"1":1,"2":0})"), std::string::npos) << *json;

  EXPECT_EQ(m->SetTrafficPolicy("a", R"({"weights": {"7": 1}})").code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(route(), 1);  // unchanged
  EXPECT_EQ(m->SetTrafficPolicy("nope", R"({"weights": {"1": 1}})").code(), StatusCode::kNotFound);
  ASSERT_TRUE(m->SetTrafficPolicy("a", R"({"weights": {"1": 0, "2": 5}})").ok());
  EXPECT_EQ(route(), 2);
  ASSERT_TRUE(m->ClearTrafficPolicy("a").ok());
  EXPECT_EQ(route(), 2);                                    // the latest
  EXPECT_EQ(route({{"x-harrier-model-version", "1"}}), 1);  // the header without a policy

  // The status page carries each version's note while a policy is set.
  ASSERT_TRUE(m->SetTrafficPolicy("a", R"({"weights": {"1": 3, "2": 1}})").ok());
  std::map<int64_t, std::string> notes;
  for (const DashboardVersion& row : m->DashboardVersions()) notes[row.state.version] = row.traffic;
  EXPECT_EQ(notes[1], "weight 3");
  EXPECT_EQ(notes[2], "weight 1");
  // The metrics carry the weights while a policy is set, and its breakers' states.
  ASSERT_TRUE(m->SetTrafficPolicy("a", R"({"weights": {"1": 3, "2": 1},
                                          "breaker": {"failure_threshold": 5}})")
                  .ok());
  TextExposition text;
  m->CollectMetrics(&text);
  EXPECT_NE(text.Text().find(R"(harrier_traffic_weight{model="a",version="1"} 3)"),
            std::string::npos);
  EXPECT_NE(
      text.Text().find(R"(harrier_traffic_breaker_state{model="a",version="2",state="closed"} 1)"),
      std::string::npos)
      << text.Text();
  EXPECT_NE(
      text.Text().find(R"(harrier_traffic_breaker_state{model="a",version="2",state="open"} 0)"),
      std::string::npos);
  EXPECT_NE(text.Text().find(
                R"(harrier_traffic_breaker_state{model="a",version="1",state="half-open"} 0)"),
            std::string::npos);
}

// A load that fails changes nothing that serves: a config selecting fewer versions, whose one
// selected version fails to reload, does not retire the versions it no longer selects.
TEST_F(ModelRepositoryManagerTest, AFailedReloadRetiresNoVersionTheNewConfigDeselects) {
  Write("a/config.pbtxt", "version_policy: { all: {} }\n");
  for (const char* v : {"1", "2", "3"})
    Write(std::string("a/") + v + "/model.onnx", "identity FP32 -1 4");
  auto manager = Explicit({"*"});
  auto& m = *manager;
  ASSERT_TRUE(m.Get("a", 1).ok());
  ASSERT_TRUE(m.SetTrafficPolicy("a", R"({"weights": {"1": 1, "3": 1}})").ok());
  Write("a/3/model.onnx", "garbage, half copied");
  ModelLoadOptions only_three;
  only_three.config_json = R"({"version_policy": {"specific": {"versions": [3]}}})";
  EXPECT_FALSE(Control(m, true, "a", only_three).ok());
  for (int64_t v : {1, 2, 3}) EXPECT_TRUE(m.Get("a", v).ok()) << "version " << v;
  auto json = m.TrafficJson("a");
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find(R"("policy":{"weights":{"1":1,"3":1})"), std::string::npos) << *json;
}

// The same in poll mode, at every poll that meets the bad config, not only the first: a later
// poll does not retry the failed reload, and must not take the config as loaded either; and
// when the good config comes back and the bad one again (the same files as the failure
// remembered), still nothing retires.
TEST_F(ModelRepositoryManagerTest, APollsFailedConfigRetiresNothingAtAnyLaterPoll) {
  const std::string good = "version_policy: { all: {} }\n";
  const std::string bad = "input [ { name: \"nope\" } ]\n";  // latest 1, and does not fit
  Write("a/config.pbtxt", good);
  for (const char* v : {"1", "2", "3"})
    Write(std::string("a/") + v + "/model.onnx", "identity FP32 -1 4");
  auto polled_manager = Polled();
  auto& m = *polled_manager;
  auto all_serve = [&] { return m.Get("a", 1).ok() && m.Get("a", 2).ok() && m.Get("a", 3).ok(); };
  ASSERT_TRUE(all_serve());
  // A poll's parts take a millisecond here; 200 ms leaves each time to finish.
  auto poll = [&] {
    m.PollNow();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  };
  for (int round = 0; round < 2; ++round) {
    Write("a/config.pbtxt", bad);
    for (int i = 0; i < 3; ++i) {
      poll();
      EXPECT_TRUE(all_serve()) << "round " << round << ", poll " << i;
    }
    Write("a/config.pbtxt", good + std::string(round + 1, '\n'));  // good again (a new fingerprint)
    poll();
    EXPECT_TRUE(Eventually(all_serve));
  }
}

// Requests routed by a policy while reloads retire a version it names, and policies set and
// cleared meanwhile: every request finds a version (the policy follows the versions under the
// same lock), none is told a version it never asked for is not found, or that the policy
// vanished.
TEST_F(ModelRepositoryManagerTest, RoutingByAPolicyNeverMeetsARetiredVersionOrAVanishedPolicy) {
  Write("a/config.pbtxt", "version_policy: { all: {} }\n");
  for (const char* v : {"1", "2", "3"})
    Write(std::string("a/") + v + "/model.onnx", "identity FP32 -1 4");
  auto manager = Explicit({"*"});
  auto& m = *manager;
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::string first_failure;
  std::mutex first_mu;
  auto fail = [&](const Status& s) {
    if (failures.fetch_add(1) == 0) {
      std::lock_guard lock(first_mu);
      first_failure = s.ToString();
    }
  };
  std::thread router([&] {
    while (!stop) {
      auto r = m.Route("a", std::nullopt, {});
      if (!r.ok()) fail(r.status());
    }
  });
  std::thread setter([&] {
    while (!stop) {
      (void)m.SetTrafficPolicy("a", R"({"weights": {"1": 0, "3": 1}})");
      (void)m.ClearTrafficPolicy("a");
    }
  });
  ModelLoadOptions with_three, without_three;
  with_three.config_json = R"({"version_policy": {"specific": {"versions": [1, 3]}}})";
  without_three.config_json = R"({"version_policy": {"specific": {"versions": [1]}}})";
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(Control(m, true, "a", with_three).ok());
    (void)m.SetTrafficPolicy("a", R"({"weights": {"1": 0, "3": 1}})");
    ASSERT_TRUE(Control(m, true, "a", without_three).ok());
  }
  stop = true;
  router.join();
  setter.join();
  EXPECT_EQ(failures.load(), 0) << first_failure;
  // Whatever the last PUT raced with, the policy in force names only versions that serve.
  for (int i = 0; i < 20; ++i) {
    auto r = m.Route("a", std::nullopt, {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ((*r)->version(), 1);
  }
}

// An unloading model under a policy answers as any unloading model does, not with the state of
// a version the policy would have picked.
TEST_F(ModelRepositoryManagerTest, AnUnloadingModelUnderAPolicyAnswersAsAnUnloadedModel) {
  Write("a/config.pbtxt", "version_policy: { all: {} }\n");
  Write("a/1/model.onnx", "identity FP32 -1 4");
  Write("a/2/model.onnx", "identity FP32 -1 4");
  Write("a/traffic.json", R"({"weights": {"1": 1, "2": 1}})");
  auto manager = Explicit({"*"});
  auto& m = *manager;
  auto held = m.Get("a", 1);  // a request in flight: the unload waits for it
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(Control(m, false, "a").ok());
  const auto routed = m.Route("a", std::nullopt, {});
  EXPECT_EQ(routed.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(routed.status().message().find("has no available versions"), std::string::npos)
      << routed.status().ToString();
  held->reset();
  // A later load reads traffic.json again: the policy is back.
  ASSERT_TRUE(Eventually([&] { return Control(m, true, "a").ok(); }));
  auto json = m.TrafficJson("a");
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find(R"("policy":{"weights":{"1":1,"2":1})"), std::string::npos) << *json;
}

// traffic.json is what the repository declares: a policy naming a version that is not there
// yet applies when it comes, and one dropped when a version left applies again when it is back.
TEST_F(ModelRepositoryManagerTest, TrafficJsonWaitsForTheVersionsItNames) {
  Write("a/config.pbtxt", "version_policy: { all: {} }\n");
  Write("a/1/model.onnx", "identity FP32 -1 4");
  Write("a/traffic.json", R"({"weights": {"1": 9, "2": 1}})");
  auto polled_manager = Polled();
  auto& m = *polled_manager;
  auto policy = [&] {
    auto json = m.TrafficJson("a");
    return json.ok() ? *json : json.status().ToString();
  };
  EXPECT_NE(policy().find(R"("policy":null)"), std::string::npos) << policy();
  Write("a/2/model.onnx", "identity FP32 -1 4");
  m.PollNow();
  EXPECT_TRUE(Eventually([&] {
    return policy().find(R"("policy":{"weights":{"1":9,"2":1})") != std::string::npos;
  })) << policy();
  // Version 2 leaves (the policy is dropped), then comes back (the file applies again).
  fs::rename(root_ / "a/2", root_ / "a.2.away");
  m.PollNow();
  EXPECT_TRUE(Eventually([&] { return policy().find(R"("policy":null)") != std::string::npos; }))
      << policy();
  fs::rename(root_ / "a.2.away", root_ / "a/2");
  m.PollNow();
  EXPECT_TRUE(Eventually([&] {
    return policy().find(R"("policy":{"weights":{"1":9,"2":1})") != std::string::npos;
  })) << policy();
  // A file too large to be a policy is not read; the policy in force stays.
  Write("a/traffic.json", R"({"weights": {"1": 1, "2": 1}})" + std::string(1 << 20, ' '));
  m.PollNow();
  m.PollNow();
  ASSERT_TRUE(Eventually([&] { return m.Get("a", 2).ok(); }));
  EXPECT_NE(policy().find(R"("policy":{"weights":{"1":9,"2":1})"), std::string::npos) << policy();
}

// A breaker opened by a broken instance closes when a reload replaces the instance; and a
// version forced by the header is marked as named (it feeds its breaker, not a rollout's guard).
TEST_F(ModelRepositoryManagerTest, AReloadClosesTheBreakerOfTheInstanceItReplaced) {
  Write("a/config.pbtxt", "version_policy: { all: {} }\n");
  Write("a/1/model.onnx", "identity FP32 -1 4");
  Write("a/2/model.onnx", "breaks FP32 -1 4");
  auto manager = Explicit({"*"});
  auto& m = *manager;
  ASSERT_TRUE(m.SetTrafficPolicy("a", R"({"weights": {"1": 1, "2": 1},
      "breaker": {"failure_threshold": 2, "open_seconds": 600}})")
                  .ok());
  auto json = [&] {
    auto j = m.TrafficJson("a");
    return j.ok() ? *j : j.status().ToString();
  };
  for (int i = 0; i < 2; ++i) {
    auto two = m.Route("a", std::nullopt, {{"x-harrier-model-version", "2"}});
    ASSERT_TRUE(two.ok()) << two.status().ToString();
    EXPECT_EQ((*two)->version(), 2);
    EXPECT_EQ(InferSync(**two, Fp32Request({1, 2, 3, 4}, {1, 4})).status().code(),
              StatusCode::kInternal);
  }
  ASSERT_NE(json().find(R"("2":"open")"), std::string::npos) << json();
  Write("a/2/model.onnx", "identity FP32 -1 4  ");  // fixed (another size: a new fingerprint)
  ASSERT_TRUE(Control(m, true, "a").ok());
  EXPECT_NE(json().find(R"("2":"closed")"), std::string::npos) << json();
  EXPECT_NE(json().find(R"("policy":{)"), std::string::npos) << json();  // kept
}

// Requests a client forces to the candidate with the header are not the rollout's traffic: they
// do not decide it (a tester's, or anyone's, failing requests cannot roll it back).
TEST_F(ModelRepositoryManagerTest, RequestsForcedToTheCandidateDoNotDecideItsRollout) {
  Write("a/config.pbtxt", "version_policy: { all: {} }\n");
  Write("a/1/model.onnx", "identity FP32 -1 4");
  Write("a/2/model.onnx", "breaks FP32 -1 4");
  auto manager = Explicit({"*"});
  auto& m = *manager;
  ASSERT_TRUE(m.SetTrafficPolicy("a", R"({"weights": {"1": 1},
      "rollout": {"candidate": 2, "steps": [10, 100], "dwell_seconds": 600},
      "guard": {"window_seconds": 60, "min_requests": 2, "max_error_rate": 0.1}})")
                  .ok());
  for (int i = 0; i < 5; ++i) {
    auto two = m.Route("a", std::nullopt, {{"x-harrier-model-version", "2"}});
    ASSERT_TRUE(two.ok()) << two.status().ToString();
    EXPECT_EQ(InferSync(**two, Fp32Request({1, 2, 3, 4}, {1, 4})).status().code(),
              StatusCode::kInternal);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // past an evaluation period
  auto json = m.TrafficJson("a");
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find(R"("state":"running")"), std::string::npos) << *json;
  EXPECT_NE(json->find(R"("rollbacks":0)"), std::string::npos) << *json;
}

TEST_F(ModelRepositoryManagerTest, TheVersionHeaderIsOneVersionWrittenAsPoliciesWriteIt) {
  Write("a/1/model.onnx", "identity FP32 -1 4");
  auto m = Load();
  EXPECT_TRUE(m->Route("a", std::nullopt, {{"x-harrier-model-version", "1"}}).ok());
  for (const char* bad : {"01", " 1", "1 ", "0", "-1"}) {
    EXPECT_EQ(m->Route("a", std::nullopt, {{"x-harrier-model-version", bad}}).status().code(),
              StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(m->Route("a", std::nullopt,
                     {{"x-harrier-model-version", "1"}, {"x-harrier-model-version", "1"}})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

// A generation is not copied to a shadow version, and the handle that a shadow or a forced
// version gives still generates: before, a policy's shadow made `percent` of generations answer
// "does not generate text".
TEST_F(ModelRepositoryManagerTest, AGeneratorWithAShadowOrAForcedVersionStillGenerates) {
  Write("text/config.pbtxt", "version_policy: { all: {} }\n");
  Write("text/1/model.gguf", "gguf");
  Write("text/2/model.gguf", "gguf");
  auto loaded = LoadWithGenerators();
  auto& m = *loaded;
  ASSERT_TRUE(m.SetTrafficPolicy(
                   "text", R"({"weights": {"1": 1}, "shadow": {"version": 2, "percent": 100}})")
                  .ok());
  auto shadowed = m.Route("text", std::nullopt, {});
  ASSERT_TRUE(shadowed.ok()) << shadowed.status().ToString();
  EXPECT_EQ((*shadowed)->version(), 1);
  EXPECT_NE((*shadowed)->generative(), nullptr);
  auto forced = m.Route("text", std::nullopt, {{"x-harrier-model-version", "2"}});
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  EXPECT_EQ((*forced)->version(), 2);
  EXPECT_NE((*forced)->generative(), nullptr);
  m.Shutdown();
}

TEST_F(ModelRepositoryManagerTest, AShadowedRequestIsAnsweredByItsVersionAndCompared) {
  Write("a/config.pbtxt", "version_policy: { all: {} }\n");
  Write("a/1/model.onnx", "identity FP32 -1 4");
  Write("a/2/model.onnx", "identity FP32 -1 4");
  auto m = Load();
  ASSERT_TRUE(
      m->SetTrafficPolicy("a", R"({"weights": {"1": 1}, "shadow": {"version": 2, "percent": 100}})")
          .ok());
  // The shadow version's figure `key` in the traffic state.
  auto figure = [&](const std::string& key) {
    auto state = m->TrafficJson("a");
    const std::string json = state.ok() ? *state : std::string();
    const size_t at = json.find("\"" + key + "\":", json.find(R"("shadow":{"2")"));
    return at == std::string::npos ? -1 : std::atoi(json.c_str() + at + key.size() + 3);
  };
  for (int i = 0; i < 20; ++i) {
    auto r = m->Route("a", std::nullopt, {});
    ASSERT_TRUE(r.ok());
    auto answer = InferSync(**r, Fp32Request({1, 2, 3, 4}, {1, 4}));
    ASSERT_TRUE(answer.ok()) << answer.status().ToString();
    EXPECT_EQ(answer->model_version, 1);
    // The copy finishes after the answer; the next one would be shed while it is queued.
    ASSERT_TRUE(Eventually([&] { return figure("compared") == i + 1; })) << *m->TrafficJson("a");
  }
  EXPECT_EQ(figure("shed"), 0);
  EXPECT_NE(m->TrafficJson("a")->find(R"("last_max_abs_difference":0})"), std::string::npos)
      << *m->TrafficJson("a");  // the same model: identical answers
}

// ---- Parallel loads (--model-load-thread-count) ---------------------------------------------

// Holds the loads whose model file's path contains `held` (every load when empty) as they create
// their first instance, until Release(); counts how many were in there at once.
class LoadGate {
 public:
  explicit LoadGate(std::string held = "") : held_(std::move(held)) {}
  void Enter(const std::string& path) {
    std::unique_lock lock(mu_);
    entered_.insert(path);
    max_inside_ = std::max(max_inside_, ++inside_);
    cv_.notify_all();
    if (path.find(held_) != std::string::npos) cv_.wait(lock, [&] { return released_; });
    --inside_;
  }
  // Whether `n` different model files have entered within `timeout`.
  bool WaitEntered(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return entered_.size() >= n; });
  }
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  int max_inside() {
    std::lock_guard lock(mu_);
    return max_inside_;
  }

 private:
  const std::string held_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> entered_;
  int inside_ = 0;
  int max_inside_ = 0;
  bool released_ = false;
};

class ParallelLoadTest : public ModelRepositoryManagerTest {
 protected:
  void SetUp() override {
    ModelRepositoryManagerTest::SetUp();
    Write("a/1/model.onnx", "identity FP32 -1 4");
    Write("b/1/model.onnx", "identity FP32 -1 4");
  }
  std::unique_ptr<ModelRepositoryManager> Create(int threads, ModelControlMode mode,
                                                 std::vector<std::string> startup = {}) {
    auto o = Options(root_.string(), 2);
    o.load_thread_count = threads;
    o.control_mode = mode;
    o.startup_models = std::move(startup);
    auto m = ModelRepositoryManager::Create(o);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return std::move(m).value();
  }
  void Gate(LoadGate* gate) {
    backend_.on_create_instance = [gate](const std::string& path) { gate->Enter(path); };
  }
};

TEST_F(ParallelLoadTest, TwoModelsLoadAtOnceAtStartWithTwoThreads) {
  LoadGate gate;
  Gate(&gate);
  auto m = Create(2, ModelControlMode::kNone);
  std::thread start([&] { m->LoadAll(); });
  // Both held inside a load at the same time: they overlap.
  EXPECT_TRUE(gate.WaitEntered(2, std::chrono::seconds(10)));
  gate.Release();
  start.join();
  EXPECT_EQ(gate.max_inside(), 2);
  EXPECT_TRUE(m->AllReady());
}

TEST_F(ParallelLoadTest, OneThreadLoadsOneModelAtATimeAtStart) {
  LoadGate gate;
  Gate(&gate);
  auto m = Create(1, ModelControlMode::kNone);
  std::thread start([&] { m->LoadAll(); });
  ASSERT_TRUE(gate.WaitEntered(1, std::chrono::seconds(10)));
  // Bounded: with one thread the second load cannot start while the first is held.
  EXPECT_FALSE(gate.WaitEntered(2, std::chrono::milliseconds(300)));
  gate.Release();
  start.join();
  EXPECT_EQ(gate.max_inside(), 1);
  EXPECT_TRUE(m->AllReady());
}

TEST_F(ParallelLoadTest, LoadRequestsForTwoModelsRunAtOnceWithTwoThreads) {
  auto m = Create(2, ModelControlMode::kExplicit);
  m->LoadAll();  // none named: nothing loads at start
  LoadGate gate;
  Gate(&gate);
  std::promise<Status> a, b;
  m->LoadModel("a", {}, [&](Status s) { a.set_value(s); });
  m->LoadModel("b", {}, [&](Status s) { b.set_value(s); });
  EXPECT_TRUE(gate.WaitEntered(2, std::chrono::seconds(10)));
  gate.Release();
  EXPECT_TRUE(a.get_future().get().ok());
  EXPECT_TRUE(b.get_future().get().ok());
  EXPECT_EQ(gate.max_inside(), 2);
  EXPECT_TRUE(m->Get("a", std::nullopt).ok());
  EXPECT_TRUE(m->Get("b", std::nullopt).ok());
}

// A load then an unload of one model keep their order with several threads: the unload waits
// for the load, while another model's load goes past both.
TEST_F(ParallelLoadTest, OneModelsLoadAndUnloadKeepTheirOrderWhileAnotherLoads) {
  auto m = Create(4, ModelControlMode::kExplicit);
  m->LoadAll();
  LoadGate gate("/a/");  // holds a's load only
  Gate(&gate);
  std::mutex mu;
  std::vector<std::string> answers;
  std::promise<void> all_done;
  auto answer = [&](std::string what) {
    return [&, what](Status s) {
      EXPECT_TRUE(s.ok()) << what << ": " << s.ToString();
      std::lock_guard l(mu);
      answers.push_back(what);
      if (answers.size() == 4) all_done.set_value();
    };
  };
  m->LoadModel("a", {}, answer("load a"));
  ASSERT_TRUE(gate.WaitEntered(1, std::chrono::seconds(10)));
  m->UnloadModel("a", answer("unload a"));
  m->LoadModel("a", {}, answer("load a again"));
  std::promise<Status> b;
  m->LoadModel("b", {}, [&](Status s) { b.set_value(s); });
  ASSERT_TRUE(b.get_future().get().ok());  // past a's held load
  {
    std::lock_guard l(mu);
    EXPECT_TRUE(answers.empty());  // a's unload waits for its load
  }
  m->UnloadModel("b", answer("unload b"));
  gate.Release();
  ASSERT_EQ(all_done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  std::vector<std::string> a_answers;
  for (const std::string& s : answers)
    if (s.find(" a") != std::string::npos) a_answers.push_back(s);
  EXPECT_EQ(a_answers, (std::vector<std::string>{"load a", "unload a", "load a again"}));
  EXPECT_TRUE(m->Get("a", std::nullopt).ok());  // the last word was a load
  EXPECT_TRUE(Eventually(
      [&] { return m->Get("b", std::nullopt).status().code() == StatusCode::kUnavailable; }));
}

// Plain loads of one model asked while one is queued join it: its reload reads the files after
// every one of them was asked. 100 queued loads of unchanged files were 100 reloads, and an
// unload asked after them answered 40 s later (probe 35, F1). Loads with overrides cannot
// join; past kMaxQueuedLoads queued tasks of a model a load is refused, since each holds its
// files while it waits.
TEST_F(ModelRepositoryManagerTest, PlainLoadsJoinTheOneQueuedAndTheQueueIsBounded) {
  Write("w/1/model.onnx", "identity FP32 -1 4");
  auto m = Explicit({"w"});
  ASSERT_TRUE(m->Get("w", 1).ok());
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> first{true};
  backend_.on_create_instance = [&](const std::string&) {
    if (first.exchange(false)) {
      entered.set_value();
      released.wait();
    }
  };
  const int created = backend_.instances_created.load();
  std::mutex mu;
  std::vector<Status> answers;
  auto answer = [&](Status s) {
    std::lock_guard lock(mu);
    answers.push_back(std::move(s));
  };
  m->LoadModel("w", {}, answer);  // runs, held in its instance's creation
  entered.get_future().wait();
  for (int i = 0; i < 50; ++i) m->LoadModel("w", {}, answer);  // one queued load
  // Seven loads with overrides fill the model's queue to eight; the next one is refused.
  ModelLoadOptions override;
  override.config_json = R"({"max_batch_size": 4})";
  for (int i = 0; i < 7; ++i) m->LoadModel("w", override, answer);
  std::promise<Status> refused;
  std::future<Status> refusal = refused.get_future();
  m->LoadModel("w", override, [&](Status s) { refused.set_value(std::move(s)); });
  // Answered at once; before, queued behind the held load (which the test releases below).
  const bool at_once = refusal.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  EXPECT_TRUE(at_once) << "the ninth queued load of the model was queued too";
  // A plain one now would run after the overrides, not with the plain one before them: refused.
  std::promise<Status> plain;
  std::future<Status> plain_refusal = plain.get_future();
  m->LoadModel("w", {}, [&](Status s) { plain.set_value(std::move(s)); });
  EXPECT_EQ(plain_refusal.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  std::promise<Status> unloaded;  // an unload is never refused
  m->UnloadModel("w", [&](Status s) { unloaded.set_value(std::move(s)); });
  release.set_value();
  const Status refusal_status = refusal.get();
  EXPECT_EQ(refusal_status.code(), StatusCode::kResourceExhausted) << refusal_status.ToString();
  EXPECT_NE(refusal_status.message().find("8 loads and unloads of it are queued"),
            std::string::npos)
      << refusal_status.ToString();
  // Its Retry-After: 8 times the model's load time (well under a second here), at least 1 s.
  EXPECT_TRUE(refusal_status.message().ends_with("; retry after 1 s")) << refusal_status.ToString();
  EXPECT_EQ(RetryAfterSeconds(refusal_status), 1);
  EXPECT_EQ(plain_refusal.get().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(unloaded.get_future().get().ok());
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard lock(mu);
    return answers.size() == 58u;
  }));
  for (const Status& s : answers) EXPECT_TRUE(s.ok()) << s.ToString();
  // The running load, the queued plain one, the seven with overrides: nine instances.
  EXPECT_EQ(backend_.instances_created.load() - created, 9);
  EXPECT_EQ(m->Get("w", 1).status().code(), StatusCode::kUnavailable);
}

// A plain load asked after an unload that waits runs after it, not with the plain load queued
// before the unload: the model ends loaded, as the order of the requests says.
TEST_F(ModelRepositoryManagerTest, APlainLoadAfterAQueuedUnloadDoesNotJoinTheLoadBeforeIt) {
  Write("w/1/model.onnx", "identity FP32 -1 4");
  auto m = Explicit({"w"});
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> first{true};
  backend_.on_create_instance = [&](const std::string&) {
    if (first.exchange(false)) {
      entered.set_value();
      released.wait();
    }
  };
  std::promise<Status> running, before, unloaded, after;
  m->LoadModel("w", {}, [&](Status s) { running.set_value(std::move(s)); });
  entered.get_future().wait();
  m->LoadModel("w", {}, [&](Status s) { before.set_value(std::move(s)); });
  m->UnloadModel("w", [&](Status s) { unloaded.set_value(std::move(s)); });
  m->LoadModel("w", {}, [&](Status s) { after.set_value(std::move(s)); });
  release.set_value();
  EXPECT_TRUE(running.get_future().get().ok());
  EXPECT_TRUE(before.get_future().get().ok());
  EXPECT_TRUE(unloaded.get_future().get().ok());
  EXPECT_TRUE(after.get_future().get().ok());
  EXPECT_TRUE(m->Get("w", 1).ok());
}

// Explicit mode: a model directory added after the start is in the index as unloaded, as
// Triton lists every model a load could load, and unloading it answers OK, as Triton does; a
// name with no directory is still not found (probe 35, F4).
TEST_F(ModelRepositoryManagerTest, ExplicitModeListsAndUnloadsADirectoryAddedAfterTheStart) {
  Write("b/1/model.onnx", "identity FP32 -1 4");
  auto m = Explicit();
  Write("a/1/model.onnx", "identity FP32 -1 4");
  Write("c/1/model.onnx", "identity FP32 -1 4");
  const std::vector<ModelVersionState> rows = m->Index();
  ASSERT_EQ(rows.size(), 3u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].name, std::string(1, static_cast<char>('a' + i)));
    EXPECT_EQ(rows[i].state, ModelState::kUnavailable);
    EXPECT_EQ(rows[i].reason, "unloaded");
  }
  // A name that is not UTF-8 is no model's: not listed (the index is JSON), not loadable.
  fs::create_directories(root_ / "bad\xff" / "1");
  EXPECT_EQ(m->Index().size(), 3u);
  EXPECT_EQ(Control(*m, true, "bad\xff").code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Control(*m, false, "a").ok());
  EXPECT_EQ(Control(*m, false, "nope").code(), StatusCode::kNotFound);
  EXPECT_EQ(Control(*m, false, "..").code(), StatusCode::kNotFound);
  ASSERT_TRUE(Control(*m, true, "c").ok());
  EXPECT_TRUE(m->Get("c", 1).ok());
  EXPECT_EQ(m->Index().size(), 3u);  // c's row is its loaded version's now
}

// Poll mode: a version whose directory is removed while it loads is not swapped in; the
// version serving goes on serving. Swapped in, it retired that version, and the next poll
// loaded it again from disk (probe 35, F2).
TEST_F(ModelRepositoryManagerTest, AVersionRemovedWhileItLoadsIsNotSwappedIn) {
  Write("a/1/model.onnx", "identity FP32 -1 4");
  auto polled = Polled();
  auto& m = *polled;
  const ServableModel* const serving = ServingNow(m, "a", 1);
  ASSERT_NE(serving, nullptr);
  Write("a/2/model.onnx", "identity FP32 -1 4");
  // Removed during version 2's warm-up, once its instance is made: its load succeeds.
  std::atomic<bool> loading_two{false};
  backend_.on_create_instance = [&](const std::string& path) {
    if (path.find("/a/2/") != std::string::npos) loading_two = true;
  };
  backend_.on_run = [&] {
    if (loading_two.exchange(false)) fs::remove_all(root_ / "a" / "2");
  };
  const int created = backend_.instances_created.load();
  m.PollNow();
  ASSERT_TRUE(Eventually([&] { return backend_.instances_created.load() > created; }));
  m.PollNow();  // after the first poll's work: one model's tasks run in order
  ASSERT_TRUE(Eventually([&] {
    auto rows = m.Index();
    return rows.size() == 1u && rows[0].version == 1 && rows[0].state == ModelState::kReady;
  })) << m.Index().size();
  EXPECT_EQ(m.Get("a", 1)->get(), serving);
  EXPECT_EQ(m.Get("a", std::nullopt)->get(), serving);
  EXPECT_EQ(backend_.instances_created.load(), created + 1);
}

// A config whose backend no engine has says so, naming the engines there are, instead of
// looking for the default backend's model.onnx (probe 29).
TEST_F(ModelRepositoryManagerTest, AnUnknownBackendNameIsNamedInTheReason) {
  Write("g/1/model.gguf", "anything");
  Write("g/config.pbtxt", "backend: \"llamacpp\"");
  auto m = LoadWithGenerators();
  const std::vector<ModelVersionState> rows = m->Index();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].state, ModelState::kUnavailable);
  EXPECT_NE(rows[0].reason.find("backend 'llamacpp' is not one this server has; it runs '"),
            std::string::npos)
      << rows[0].reason;
  EXPECT_EQ(rows[0].reason.find("model.onnx"), std::string::npos) << rows[0].reason;
}

// Explicit mode, nothing serving: a load whose version directory is removed while it loads
// fails, saying so, and the version is UNAVAILABLE with that reason; it answered 200 and the
// model stayed LOADING for good (probe 37). A load once the directory is back serves.
TEST_F(ModelRepositoryManagerTest, ALoadWhoseOnlyVersionVanishesFailsAndSaysWhy) {
  Write("a/1/model.onnx", "identity FP32 -1 4");
  auto m = Explicit();
  const fs::path away = root_.string() + "-away";  // outside the repository
  std::atomic<bool> loading{false};
  backend_.on_create_instance = [&](const std::string&) { loading = true; };
  backend_.on_run = [&] {
    if (loading.exchange(false)) fs::rename(root_ / "a" / "1", away);
  };
  const Status load = Control(*m, true, "a");
  EXPECT_EQ(load.code(), StatusCode::kNotFound) << load.ToString();
  EXPECT_NE(load.message().find("version 1's directory was removed while it loaded"),
            std::string::npos)
      << load.ToString();
  auto rows = m->Index();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].state, ModelState::kUnavailable);
  EXPECT_EQ(rows[0].reason, "version 1's directory was removed while it loaded");
  backend_.on_run = nullptr;
  fs::rename(away, root_ / "a" / "1");
  ASSERT_TRUE(Control(*m, true, "a").ok());
  EXPECT_TRUE(m->Get("a", 1).ok());
}

}  // namespace
}  // namespace harrier

namespace harrier {
namespace {

// ---- Statistics across a reload (probe 41) ---------------------------------------------------

// A sink that only waits for the end.
struct EndOnlySink : GenerationSink {
  std::promise<void> ended;
  void OnStart(int, int) override {}
  void OnToken(std::string_view, float) override {}
  void OnEnd(FinishReason, const GenerationUsage&, const Status&) override { ended.set_value(); }
};

// `family{model="m",version="1"} N` as a scrape of `m` shows it, or -1 when absent.
double ScrapedValue(ModelRepositoryManager& m, const std::string& family,
                    const std::string& model) {
  TextExposition text;
  m.CollectMetrics(&text);
  const std::string key = family + "{model=\"" + model + "\",version=\"1\"} ";
  const std::string all = text.Text();
  const size_t at = all.find(key);
  if (at == std::string::npos) return -1;
  return std::stod(all.substr(at + key.size(), all.find('\n', at) - at - key.size()));
}

// A reload of a serving version counts on into its statistics: a counter that fell back to 0
// under the same labels read to Prometheus as a reset it cannot always see (5, reload, 8 read
// as +3), and the request the old instance answered during the swap was counted nowhere.
TEST_F(ModelRepositoryManagerTest, AReloadOfAVersionKeepsCountingIntoItsStatistics) {
  Write("a/1/model.onnx", "identity FP32 -1 4");
  auto manager = Explicit({"a"});
  auto& m = *manager;
  {
    auto a = m.Get("a", std::nullopt);
    ASSERT_TRUE(a.ok());
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(InferSync(**a, Fp32Request({1, 2, 3, 4}, {1, 4})).ok());
  }
  // One request runs on the old instance while the reload swaps the new one in.
  std::atomic<bool> hold_next{true};
  std::promise<void> running, release;
  std::shared_future<void> released = release.get_future().share();
  backend_.on_run = [&] {
    if (!hold_next.exchange(false)) return;
    running.set_value();
    released.wait();
  };
  const ServableModel* old_instance = ServingNow(m, "a", 1);
  std::promise<StatusOr<InferenceResponse>> in_flight;
  {
    auto a = m.Get("a", std::nullopt);
    ASSERT_TRUE(a.ok());
    (*a)->Infer(Fp32Request({1, 2, 3, 4}, {1, 4}),
                [&](StatusOr<InferenceResponse> r) { in_flight.set_value(std::move(r)); });
  }
  running.get_future().wait();
  auto reloaded = std::async(std::launch::async, [&] { return Control(m, true, "a"); });
  for (int i = 0; i < 500 && ServingNow(m, "a", 1) == old_instance; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_NE(ServingNow(m, "a", 1), old_instance) << "the reload did not swap";
  release.set_value();
  ASSERT_TRUE(in_flight.get_future().get().ok());
  ASSERT_TRUE(reloaded.get().ok());
  {
    auto a = m.Get("a", std::nullopt);
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(InferSync(**a, Fp32Request({1, 2, 3, 4}, {1, 4})).ok());
  }
  auto stats = m.Stats("a", 1);
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->size(), 1u);
  EXPECT_EQ((*stats)[0].success.count, 5u);  // 3 before, 1 across the swap, 1 after
  EXPECT_EQ(ScrapedValue(m, "harrier_request_success_total", "a"), 5);
  // Observed once the answer has been handed back, just after the callback.
  EXPECT_TRUE(Eventually(
      [&] { return ScrapedValue(m, "harrier_request_duration_seconds_count", "a") == 5; }));

  // A reload whose config changes the batch size counts into new statistics (Triton's batch
  // statistics are per size).
  Write("a/config.pbtxt", "max_batch_size: 8\n");
  ASSERT_TRUE(Control(m, true, "a").ok());
  stats = m.Stats("a", 1);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].success.count, 0u);
  // An unload, then a load, starts again too: the version's series were gone meanwhile.
  {
    auto a = m.Get("a", std::nullopt);
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(InferSync(**a, Fp32Request({1, 2, 3, 4}, {1, 4})).ok());
  }
  ASSERT_TRUE(Control(m, false, "a").ok());
  ASSERT_TRUE(Control(m, true, "a").ok());
  stats = m.Stats("a", 1);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].success.count, 0u);
}

// A generator's token counters are its requests' (the load's warm-up token is not among them),
// and a reload keeps them.
TEST_F(ModelRepositoryManagerTest, TokenCountersCountRequestsNotTheWarmUpAndOutliveAReload) {
  Write("text/1/model.gguf", "gguf");
  auto manager = Explicit({"text"}, "", &with_generators_);
  auto& m = *manager;
  EXPECT_EQ(ScrapedValue(m, "harrier_generated_tokens_total", "text"), 0);
  EXPECT_EQ(ScrapedValue(m, "harrier_prompt_tokens_total", "text"), 0);
  auto generate = [&] {
    auto text = m.Get("text", std::nullopt);
    ASSERT_TRUE(text.ok());
    GenerationRequest request;
    request.prompt = "abc";  // the fake's tokens: one a byte
    request.max_tokens = -1;
    auto sink = std::make_shared<EndOnlySink>();
    auto ended = sink->ended.get_future();
    ASSERT_TRUE((*text)->generative()->Generate(std::move(request), sink).ok());
    ended.wait();
  };
  generate();
  EXPECT_EQ(ScrapedValue(m, "harrier_generated_tokens_total", "text"), 4);  // the fake's script
  EXPECT_EQ(ScrapedValue(m, "harrier_prompt_tokens_total", "text"), 3);
  ASSERT_TRUE(Control(m, true, "text").ok());
  EXPECT_EQ(ScrapedValue(m, "harrier_generated_tokens_total", "text"), 4);
  generate();
  EXPECT_EQ(ScrapedValue(m, "harrier_generated_tokens_total", "text"), 8);
  EXPECT_EQ(ScrapedValue(m, "harrier_prompt_tokens_total", "text"), 6);
  m.Shutdown();
}

}  // namespace
}  // namespace harrier
