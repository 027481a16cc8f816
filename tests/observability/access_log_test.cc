#include "observability/access_log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace harrier {
namespace {

AccessRecord Inference() {
  AccessRecord r;
  r.request_id = "abc-1";
  r.protocol = "http";
  r.method = "POST";
  r.target = "/v2/models/simple/infer";
  r.status = 200;
  r.model = "simple";
  r.model_version = 1;
  r.input_shapes_json = R"([{"name":"INPUT0","datatype":"INT32","shape":[1,16]}])";
  r.request_bytes = 300;
  r.response_bytes = 400;
  r.timing.queue_ns = 12'400;
  r.timing.compute_input_ns = 3'000;
  r.timing.compute_infer_ns = 50'000;
  r.output_ns = 4'000;
  r.total_ns = 80'000;
  return r;
}

TEST(AccessLogFormatTest, Json) {
  std::string out;
  AppendAccessRecordJson(Inference(), &out);
  EXPECT_EQ(out, R"("request_id":"abc-1","protocol":"http","method":"POST",)"
                 R"("target":"/v2/models/simple/infer","status":200,"model":"simple","version":1,)"
                 R"("inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16]}],)"
                 R"("request_bytes":300,"response_bytes":400,"queue_us":12,"input_us":3,)"
                 R"("infer_us":50,"output_us":4,"total_us":80)");
}

// The connection's HTTP and TLS versions follow the protocol; neither when not known or in clear.
TEST(AccessLogFormatTest, TheHttpVersionAndTheTlsVersionFollowTheProtocol) {
  AccessRecord r = Inference();
  r.http_version = HttpVersion::kHttp2;
  r.tls_version = "TLSv1.3";
  std::string json;
  AppendAccessRecordJson(r, &json);
  EXPECT_NE(json.find(R"("protocol":"http","http_version":"HTTP/2","tls":"TLSv1.3","method")"),
            std::string::npos)
      << json;
  r.tls_version = {};
  r.http_version = HttpVersion::kHttp11;
  std::string text;
  AppendAccessRecordText(r, &text);
  EXPECT_NE(text.find(" protocol=http http_version=HTTP/1.1 method=POST "), std::string::npos)
      << text;
  EXPECT_EQ(text.find("tls="), std::string::npos) << text;
}

// The inputs' names are the client's: the characters no log value holds raw are escaped in them
// too, and in the text format a space (which would split the line's fields) makes the value one
// JSON string (probe 52).
TEST(AccessLogFormatTest, InputNamesAreEscapedLikeEveryOtherValue) {
  AccessRecord r = Inference();
  const std::string inputs =
      "[{\"name\":\"IN\x7fPUT \xc2\x85\xc2\x9b[2J\xe2\x80\xa8 status=200\",\"datatype\":\"INT32\","
      "\"shape\":[1]}]";
  r.input_shapes_json = inputs;
  std::string json;
  AppendAccessRecordJson(r, &json);
  EXPECT_NE(json.find(R"("inputs":[{"name":"IN\u007fPUT \u0085\u009b[2J\u2028 status=200",)"),
            std::string::npos)
      << json;
  std::string text;
  AppendAccessRecordText(r, &text);
  EXPECT_NE(text.find(R"( inputs="[{\"name\":\"IN\u007fPUT \u0085\u009b[2J\u2028 status=200\",)"),
            std::string::npos)
      << text;
  // Without a space it stays as it is.
  r.input_shapes_json = R"([{"name":"INPUT0","datatype":"INT32","shape":[1,16]}])";
  text.clear();
  AppendAccessRecordText(r, &text);
  EXPECT_NE(text.find(R"( inputs=[{"name":"INPUT0","datatype":"INT32","shape":[1,16]}] )"),
            std::string::npos)
      << text;
}

TEST(AccessLogFormatTest, JsonErrorWithoutModelOrDurations) {
  AccessRecord r;
  r.request_id = "x";
  r.protocol = "http";
  r.method = "GET";
  r.target = "/v2/nope";
  r.status = 404;
  r.error = "unknown path '/v2/nope'";
  r.response_bytes = 40;
  std::string out;
  AppendAccessRecordJson(r, &out);
  EXPECT_EQ(out, R"("request_id":"x","protocol":"http","method":"GET","target":"/v2/nope",)"
                 R"("status":404,"request_bytes":0,"response_bytes":40,)"
                 R"("error":"unknown path '/v2/nope'")");
}

// A gRPC call names the model it asked for even when none is chosen; versions start at 1.
TEST(AccessLogFormatTest, AModelWithNoVersionChosenHasNoVersionField) {
  AccessRecord r;
  r.request_id = "x";
  r.protocol = "grpc";
  r.method = "ModelInfer";
  r.target = "/inference.GRPCInferenceService/ModelInfer";
  r.status = 5;
  r.model = "nosuch";
  r.error = "no such model";
  std::string out;
  AppendAccessRecordJson(r, &out);
  EXPECT_EQ(out, R"("request_id":"x","protocol":"grpc","method":"ModelInfer",)"
                 R"("target":"/inference.GRPCInferenceService/ModelInfer","status":5,)"
                 R"("model":"nosuch","request_bytes":0,"response_bytes":0,)"
                 R"("error":"no such model")");
}

TEST(AccessLogFormatTest, AGenerationHasItsTokenCountsAndTimeToFirstTokenInsteadOfStages) {
  AccessRecord r;
  r.request_id = "f00d";
  r.protocol = "http";
  r.method = "POST";
  r.target = "/v1/chat/completions";
  r.status = 200;
  r.model = "llm";
  r.model_version = 2;
  r.request_bytes = 90;
  r.response_bytes = 1200;
  r.total_ns = 2'500'000'000;
  r.prompt_tokens = 31;
  r.completion_tokens = 64;
  r.first_token_ns = 85'000'000;
  std::string out;
  AppendAccessRecordJson(r, &out);
  EXPECT_EQ(out, R"("request_id":"f00d","protocol":"http","method":"POST",)"
                 R"("target":"/v1/chat/completions","status":200,"model":"llm","version":2,)"
                 R"("request_bytes":90,"response_bytes":1200,"prompt_tokens":31,)"
                 R"("completion_tokens":64,"ttft_us":85000,"total_us":2500000)");
}

TEST(AccessLogFormatTest, TheApiKeyIdFollowsTheStatusOnlyWhenThereIsOne) {
  AccessRecord r = Inference();
  r.key_id = "ci";
  std::string out;
  AppendAccessRecordJson(r, &out);
  EXPECT_NE(out.find(R"("status":200,"key":"ci","model":"simple")"), std::string::npos) << out;
  out.clear();
  AppendAccessRecordJson(Inference(), &out);
  EXPECT_EQ(out.find("\"key\""), std::string::npos) << out;
}

TEST(AccessLogFormatTest, TextQuotesValuesThatWouldSplit) {
  AccessRecord r = Inference();
  r.status = 400;
  r.total_ns = 0;
  r.error = "bad \"input\"";
  std::string out;
  AppendAccessRecordText(r, &out);
  EXPECT_EQ(out,
            "request_id=abc-1 protocol=http method=POST target=/v2/models/simple/infer "
            "status=400 model=simple version=1 "
            R"(inputs=[{"name":"INPUT0","datatype":"INT32","shape":[1,16]}] )"
            R"(request_bytes=300 response_bytes=400 error="bad \"input\"")");
}

TEST(AccessLogFormatTest, InvalidUtf8BecomesQuestionMarksValidUtf8StaysAsIs) {
  AccessRecord r;
  r.request_id = "x";
  r.status = 404;
  r.target = "/v2/models/caf\xc3\xa9/ready";  // valid: kept
  // A stray byte, a cut sequence, a surrogate.
  r.error =
      "unknown model 'a\xff\xc3"
      "b' {\xed\xa0\x80}";
  std::string json;
  AppendAccessRecordJson(r, &json);
  EXPECT_NE(json.find("\"target\":\"/v2/models/caf\xc3\xa9/ready\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"error\":\"unknown model 'a??b' {???}\""), std::string::npos) << json;
  std::string text;
  AppendAccessRecordText(r, &text);
  EXPECT_NE(text.find("unknown model 'a??b' {???}"), std::string::npos) << text;
}

// Characters that split a line for log tools or drive a terminal never reach a line raw, in
// either format: C0 controls and DEL, C1 controls (NEL U+0085 ends a line for some tools, CSI
// U+009B starts an escape), U+2028 and U+2029. A target may hold them percent-decoded or in
// UTF-8; an error message may echo them.
TEST(AccessLogFormatTest, LineBreakingAndTerminalCharactersAreEscaped) {
  AccessRecord r;
  r.request_id = "x";
  r.status = 404;
  r.target =
      "/v2/models/a\xc2\x85"
      "b\xc2\x9b"
      "31mc\xe2\x80\xa8"
      "d\xe2\x80\xa9"
      "e\x7f\x1b[0m/ready";
  r.error = "tab\there\u00e9";  // a tab is escaped; é (C3 A9) is kept
  const std::string escaped = R"(/v2/models/a\u0085b\u009b31mc\u2028d\u2029e\u007f\u001b[0m/ready)";
  std::string json;
  AppendAccessRecordJson(r, &json);
  EXPECT_NE(json.find("\"target\":\"" + escaped + "\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"error\":\"tab\\there\u00e9\""), std::string::npos) << json;
  std::string text;
  AppendAccessRecordText(r, &text);
  EXPECT_NE(text.find("target=\"" + escaped + "\""), std::string::npos) << text;
  for (const std::string& line : {json, text}) {
    for (std::string_view raw :
         {"\xc2\x85", "\xc2\x9b", "\xe2\x80\xa8", "\xe2\x80\xa9", "\x7f", "\x1b"})
      EXPECT_EQ(line.find(raw), std::string::npos) << line;
  }
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// `record` written through an AsyncAccessLog in the text format, as the file's lines: the
// packed path a real server's records take (the record may die right after Write).
std::vector<std::string> WrittenAsText(const AccessRecord& record, const std::string& name) {
  const std::string path =
      (std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()))).string();
  std::filesystem::remove(path);
  {
    AsyncAccessLog::Options options;
    options.format = LogFormat::kText;
    options.file = path;
    auto log = AsyncAccessLog::Create(options);
    EXPECT_TRUE(log.ok()) << log.status().ToString();
    if (!log.ok()) return {};
    (*log)->Write(record);
  }  // destruction writes out what is buffered
  std::vector<std::string> lines = Lines(path);
  std::filesystem::remove(path);
  return lines;
}

TEST(AsyncAccessLogTest, WritesOneJsonLinePerRecordToAFile) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("access_log_test_" + std::to_string(getpid())))
          .string();
  std::filesystem::remove(path);
  {
    AsyncAccessLog::Options options;
    options.format = LogFormat::kJson;
    options.file = path;
    auto log = AsyncAccessLog::Create(options);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    for (int i = 0; i < 100; ++i) (*log)->Write(Inference());
    EXPECT_EQ((*log)->dropped_lines(), 0u);
  }  // destruction writes out what is buffered
  const std::vector<std::string> lines = Lines(path);
  ASSERT_EQ(lines.size(), 100u);
  EXPECT_EQ(lines[0].rfind(R"({"time":")", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(R"("level":"info","log":"access","request_id":"abc-1",)"),
            std::string::npos)
      << lines[0];
  EXPECT_EQ(lines[0].back(), '}');
  std::filesystem::remove(path);
}

TEST(AsyncAccessLogTest, TheApiKeyIdIsWrittenOffTheRequestPathToo) {
  AccessRecord r = Inference();
  const std::string key_id = "team-a";  // packed with the record, so it may die after Write
  r.key_id = key_id;
  const std::vector<std::string> lines = WrittenAsText(r, "access_log_key_test");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(" status=200 key=team-a model=simple "), std::string::npos) << lines[0];
}

// A stream's line names the id its client sent beside its own (probe 41), through the packed
// record too; absent when there is none.
TEST(AsyncAccessLogTest, TheConnectionsVersionsAreWrittenOffTheRequestPathToo) {
  AccessRecord r = Inference();
  r.http_version = HttpVersion::kHttp11;
  const std::string tls = "TLSv1.2";
  r.tls_version = tls;
  const std::vector<std::string> lines = WrittenAsText(r, "access_log_tls_test");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(" protocol=http http_version=HTTP/1.1 tls=TLSv1.2 method=POST "),
            std::string::npos)
      << lines[0];
}

TEST(AsyncAccessLogTest, AStreamsClientRequestIdFollowsItsOwnId) {
  AccessRecord r = Inference();
  const std::string client = "proxy-7";
  r.client_request_id = client;
  const std::vector<std::string> lines = WrittenAsText(r, "access_log_client_id_test");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(" client_request_id=proxy-7 protocol="), std::string::npos) << lines[0];
  std::string json;
  AppendAccessRecordJson(Inference(), &json);
  EXPECT_EQ(json.find("client_request_id"), std::string::npos) << json;
}

TEST(AsyncAccessLogTest, AGenerationsTokenCountsAndFirstTokenTimeAreWrittenToo) {
  // They were left out of the packed record once (session 9 found every real generation line
  // without them, while the handler's tests, which record the AccessRecord itself, passed).
  AccessRecord r = Inference();
  r.target = "/v1/completions";
  r.prompt_tokens = 12;
  r.completion_tokens = 34;
  r.first_token_ns = 56'000;
  r.total_ns = 789'000;
  const std::vector<std::string> lines = WrittenAsText(r, "access_log_gen_test");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(" prompt_tokens=12 completion_tokens=34 ttft_us=56 total_us=789"),
            std::string::npos)
      << lines[0];
  EXPECT_EQ(lines[0].find("queue_us"), std::string::npos) << lines[0];
}

TEST(AsyncAccessLogTest, AFileThatCannotBeOpenedIsAnError) {
  AsyncAccessLog::Options options;
  options.file = std::filesystem::temp_directory_path().string();  // a directory
  auto log = AsyncAccessLog::Create(options);
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), StatusCode::kInvalidArgument);
}

TEST(AsyncAccessLogTest, AFullBufferDropsLinesInsteadOfBlocking) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("access_log_drop_" + std::to_string(getpid())))
          .string();
  std::filesystem::remove(path);
  uint64_t dropped = 0;
  {
    AsyncAccessLog::Options options;
    options.format = LogFormat::kText;
    options.file = path;
    options.buffer_bytes = 4096;                     // a handful of lines
    options.flush_interval = std::chrono::hours(1);  // only "half full" wakes the writer
    auto log = AsyncAccessLog::Create(options);
    ASSERT_TRUE(log.ok());
    for (int i = 0; i < 20000; ++i) (*log)->Write(Inference());
    dropped = (*log)->dropped_lines();
  }  // destruction writes out the rest
  const size_t written = Lines(path).size();
  EXPECT_GT(written, 0u);
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(written + dropped, 20000u);
  std::filesystem::remove(path);
}

// In a child: writes records to `path` with the file-size limit (ulimit -f) at `limit` bytes, so
// that a write is cut short inside a line, then with the limit raised. Exits 0 once done.
void WriteAcrossTheFileSizeLimit(const std::string& path, rlim_t limit) {
  std::signal(SIGXFSZ, SIG_IGN);  // as the server does (cli/stop_signals.cc)
  rlimit original{};
  getrlimit(RLIMIT_FSIZE, &original);
  rlimit lowered = original;
  lowered.rlim_cur = limit;
  if (setrlimit(RLIMIT_FSIZE, &lowered) != 0) _exit(2);
  AsyncAccessLog::Options options;
  options.format = LogFormat::kJson;
  options.file = path;
  options.flush_interval = std::chrono::milliseconds(1);
  auto log = AsyncAccessLog::Create(options);
  if (!log.ok()) _exit(3);
  for (int i = 0; i < 20; ++i) (*log)->Write(Inference());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((*log)->dropped_lines() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if ((*log)->dropped_lines() == 0) _exit(4);
  if (setrlimit(RLIMIT_FSIZE, &original) != 0) _exit(5);
  AccessRecord after = Inference();
  after.request_id = "after";
  for (int i = 0; i < 3; ++i) (*log)->Write(after);
  log->reset();  // writes out the rest
  _exit(0);
}

// A write the disk cuts short (full, or the file-size limit) leaves no part of a line behind:
// the next line does not start glued to a fragment (probe 52).
TEST(AsyncAccessLogTest, AWriteCutShortLeavesOnlyWholeLines) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("access_log_cut_" + std::to_string(getpid())))
          .string();
  std::filesystem::remove(path);
  GTEST_FLAG_SET(death_test_style, "fast");
  // 1000 bytes: a few whole lines (each about 400), then one cut.
  EXPECT_EXIT(WriteAcrossTheFileSizeLimit(path, 1000), ::testing::ExitedWithCode(0), "");
  const std::vector<std::string> lines = Lines(path);
  ASSERT_GE(lines.size(), 4u);
  for (const std::string& line : lines) {
    EXPECT_EQ(line.front(), '{') << line;
    EXPECT_EQ(line.back(), '}') << line;
    EXPECT_EQ(line.find("{\"time\"", 1), std::string::npos) << line;  // one record a line
  }
  EXPECT_NE(lines.back().find("\"request_id\":\"after\""), std::string::npos) << lines.back();
  std::filesystem::remove(path);
}

// Lines that cannot be written (a full disk) are counted as dropped, not lost unseen.
TEST(AsyncAccessLogTest, LinesThatCannotBeWrittenAreCountedAsDropped) {
  AsyncAccessLog::Options options;
  options.file = "/dev/full";  // every write: ENOSPC
  auto log = AsyncAccessLog::Create(options);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  for (int i = 0; i < 10; ++i) (*log)->Write(Inference());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((*log)->dropped_lines() < 10 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ((*log)->dropped_lines(), 10u);
}

// The log's file is a pipe whose reader stopped reading (a stuck log shipper): lines that do not
// fit are dropped, and destruction gives up on what is buffered after stop_grace instead of
// waiting for the reader (it waited forever, and with it the server's stop).
TEST(AsyncAccessLogTest, AStalledPipeCannotHoldTheDestructionPastItsGrace) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("access_log_fifo_" + std::to_string(getpid())))
          .string();
  std::filesystem::remove(path);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  const int reader = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // never reads
  ASSERT_GE(reader, 0);
  uint64_t dropped = 0;
  std::chrono::steady_clock::duration took{};
  {
    AsyncAccessLog::Options options;
    options.file = path;
    options.flush_interval = std::chrono::milliseconds(1);
    options.stop_grace = std::chrono::milliseconds(200);
    options.buffer_bytes = 64u << 10;
    auto log = AsyncAccessLog::Create(options);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    for (int i = 0; i < 5000; ++i) {  // ~1.5 MB: more than the pipe holds (64 KiB)
      (*log)->Write(Inference());
      if (i % 100 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    dropped = (*log)->dropped_lines();
    const auto start = std::chrono::steady_clock::now();
    log->reset();
    took = std::chrono::steady_clock::now() - start;
  }
  EXPECT_GT(dropped, 0u);
  EXPECT_GE(took, std::chrono::milliseconds(200));
  EXPECT_LT(took, std::chrono::seconds(5));
  ::close(reader);
  std::filesystem::remove(path);
}

// logrotate renames the file (or it is deleted): the log opens a new one at its path within a
// second, instead of filling the renamed or deleted file forever.
TEST(AsyncAccessLogTest, AFileMovedOrRemovedIsOpenedAgainAtItsPath) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("access_log_rotate_" + std::to_string(getpid())))
          .string();
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".1");
  AsyncAccessLog::Options options;
  options.file = path;
  auto log = AsyncAccessLog::Create(options);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  auto wait_for_lines = [](const std::string& p, size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (std::filesystem::exists(p) && Lines(p).size() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  };
  (*log)->Write(Inference());
  ASSERT_TRUE(wait_for_lines(path, 1));
  std::filesystem::rename(path, path + ".1");  // rotated
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  (*log)->Write(Inference());
  ASSERT_TRUE(wait_for_lines(path, 1)) << "no new file at the path";
  EXPECT_EQ(Lines(path + ".1").size(), 1u);  // the rotated file got nothing more
  std::filesystem::remove(path);             // deleted
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  (*log)->Write(Inference());
  EXPECT_TRUE(wait_for_lines(path, 1)) << "no new file after the delete";
  log->reset();
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".1");
}

TEST(AsyncAccessLogTest, TextLinesAreTimestampedAndWrittenWithinTheFlushInterval) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("access_log_text_" + std::to_string(getpid())))
          .string();
  std::filesystem::remove(path);
  AsyncAccessLog::Options options;
  options.file = path;
  options.flush_interval = std::chrono::milliseconds(10);
  auto log = AsyncAccessLog::Create(options);
  ASSERT_TRUE(log.ok());
  (*log)->Write(Inference());
  std::vector<std::string> lines;
  for (int i = 0; i < 500 && lines.empty(); ++i) {  // without destroying the log
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    lines = Lines(path);
  }
  ASSERT_EQ(lines.size(), 1u);
  // "2026-11-29 19:40:01.123 access request_id=abc-1 ..."
  ASSERT_GT(lines[0].size(), 31u);
  EXPECT_EQ(lines[0][4], '-');
  EXPECT_EQ(lines[0][10], ' ');
  EXPECT_EQ(lines[0][19], '.');
  EXPECT_EQ(lines[0].substr(23, 25), " access request_id=abc-1 ");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace harrier
