#include "cli/serve_flags.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace harrier {
namespace {

// Parses `serve` with `args` (after the subcommand) as main.cc does; the exit code CLI11_PARSE
// would return (0: parsed).
int Parse(std::vector<std::string> args, ServeFlags* flags) {
  CLI::App app{"harrier"};
  app.require_subcommand(1);
  CLI::App* serve = app.add_subcommand("serve");
  AddServeFlags(serve, flags);
  args.insert(args.begin(), {"serve", "--model-repository", "/repo"});
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return e.get_exit_code();
  }
  return 0;
}

TEST(ServeFlagsTest, ModelLoadThreadCountDefaultsToTwoAndTakesAPositiveInteger) {
  ServeFlags flags;
  ASSERT_EQ(Parse({}, &flags), 0);
  EXPECT_EQ(flags.model_load_thread_count, 2);
  EXPECT_EQ(flags.model_load_thread_count, ModelRepositoryManager::Options{}.load_thread_count);
  for (const char* n : {"1", "4", "256"}) {
    ServeFlags given;
    ASSERT_EQ(Parse({"--model-load-thread-count", n}, &given), 0) << n;
    EXPECT_EQ(given.model_load_thread_count, std::stoi(n));
  }
}

TEST(ServeFlagsTest, ModelLoadThreadCountRefusesZeroNegativeAndNonIntegers) {
  // As every range-checked flag: CLI11's ValidationError, which main() returns as the exit code
  // (docs/server.md: "CLI11's own codes (non-zero) for malformed flags").
  const int refused = CLI::ValidationError("x").get_exit_code();
  ASSERT_NE(refused, 0);
  for (const char* n : {"0", "-1", "257", "1.5", "two", ""}) {
    ServeFlags flags;
    EXPECT_EQ(Parse({"--model-load-thread-count", n}, &flags), refused) << "'" << n << "'";
  }
}

TEST(ServeFlagsTest, ModelLoadRetainDefaultsTo512MiBAndTakesZeroToATebibyte) {
  ServeFlags flags;
  ASSERT_EQ(Parse({}, &flags), 0);
  EXPECT_EQ(flags.model_load_retain_mb, 512);
  EXPECT_EQ(static_cast<uint64_t>(flags.model_load_retain_mb) << 20,
            ModelRepositoryManager::Options{}.load_retain_bytes);
  for (const char* n : {"0", "1", "1048576"}) {
    ServeFlags given;
    ASSERT_EQ(Parse({"--model-load-retain-mb", n}, &given), 0) << n;
    EXPECT_EQ(given.model_load_retain_mb, std::stoll(n));
  }
  const int refused = CLI::ValidationError("x").get_exit_code();
  for (const char* n : {"-1", "1048577", "0.5", "lots"}) {
    ServeFlags refused_flags;
    EXPECT_EQ(Parse({"--model-load-retain-mb", n}, &refused_flags), refused) << "'" << n << "'";
  }
}

TEST(ServeFlagsTest, BusyPollDefaultsToTheServersAndTakesZeroToAMillisecond) {
  ServeFlags flags;
  ASSERT_EQ(Parse({}, &flags), 0);
  EXPECT_EQ(flags.busy_poll_us, 50);
  EXPECT_EQ(flags.busy_poll_us, HttpServer::Options{}.busy_poll.count());
  for (const char* n : {"0", "1", "1000"}) {
    ServeFlags given;
    ASSERT_EQ(Parse({"--io-busy-poll-us", n}, &given), 0) << n;
    EXPECT_EQ(given.busy_poll_us, std::stoi(n));
  }
  const int refused = CLI::ValidationError("x").get_exit_code();
  for (const char* n : {"-1", "1001", "fast"}) {
    ServeFlags given;
    EXPECT_EQ(Parse({"--io-busy-poll-us", n}, &given), refused) << n;
  }
}

TEST(ServeFlagsTest, IdNamesTheServerAndRefusesEmptyOrControlCharacters) {
  ServeFlags flags;
  ASSERT_EQ(Parse({}, &flags), 0);
  EXPECT_EQ(flags.server_id, "harrier");
  ServeFlags triton;
  ASSERT_EQ(Parse({"--id", "triton"}, &triton), 0);
  EXPECT_EQ(triton.server_id, "triton");
  const int refused = CLI::ValidationError("x").get_exit_code();
  for (const std::string& bad : {std::string(), std::string("a\nb"), std::string(129, 'x')}) {
    ServeFlags given;
    EXPECT_EQ(Parse({"--id", bad}, &given), refused) << bad.size();
  }
}

// The defaults README.md and docs/server.md quote, and that a container started with nothing
// but --model-repository relies on (Triton's ports).
TEST(ServeFlagsTest, DefaultsAreTheDocumentedOnes) {
  ServeFlags flags;
  ASSERT_EQ(Parse({}, &flags), 0);
  EXPECT_EQ(flags.http_port, 8000);
  EXPECT_EQ(flags.grpc_port, 8001);
  EXPECT_EQ(flags.metrics_port, 8002);
  EXPECT_EQ(flags.https_port, 8443);
  EXPECT_EQ(flags.http_address, "0.0.0.0");
  EXPECT_EQ(flags.plain_http, "on");
  EXPECT_EQ(flags.metrics_tls, "off");
  EXPECT_EQ(flags.model_control_mode, "none");
  EXPECT_EQ(flags.repository_poll_secs, 15);
  EXPECT_FALSE(flags.allow_client_shm);
  EXPECT_EQ(flags.access_log, "off");
  EXPECT_EQ(flags.trace_endpoint, "");
  EXPECT_DOUBLE_EQ(flags.trace_sample_ratio, 0.01);
  EXPECT_EQ(flags.overload_protection, "on");
  EXPECT_EQ(flags.inline_execution, "auto");
  EXPECT_DOUBLE_EQ(flags.shutdown_delay_secs, 0);
  EXPECT_EQ(flags.exit_timeout_secs, 30);
  EXPECT_DOUBLE_EQ(flags.generation_disconnect_grace_secs, 0);
  EXPECT_DOUBLE_EQ(flags.generation_stream_retention_secs, 300);
  EXPECT_DOUBLE_EQ(flags.generation_heartbeat_secs, 15);
}

// CLI11 reads -1 into an unsigned flag as 2^64-1: a --max-connections of it (or anything at or
// above 2^63) started a server that closed every connection (probe 39).
TEST(ServeFlagsTest, UnsignedLimitsAreBoundedSoThatMinusOneIsRefused) {
  for (const char* bad : {"-1", "99999999999999999999", "1073741825", "9223372036854775808"}) {
    ServeFlags flags;
    EXPECT_NE(Parse({"--max-connections", bad}, &flags), 0) << bad;
  }
  ServeFlags flags;
  ASSERT_EQ(Parse({"--max-connections", "1073741824"}, &flags), 0);
  EXPECT_EQ(flags.max_connections, uint64_t{1} << 30);
  for (const char* bad : {"-1", "1073741825", "4294967296"}) {
    ServeFlags other;
    EXPECT_NE(Parse({"--max-connections-per-client", bad}, &other), 0) << bad;
  }
  EXPECT_EQ(flags.max_connections_per_client, 0u);  // none by default
  ASSERT_EQ(Parse({"--max-connections-per-client", "16"}, &flags), 0);
  EXPECT_EQ(flags.max_connections_per_client, 16u);
  for (const char* bad : {"-1", "10000001"}) {
    ServeFlags other;
    EXPECT_NE(Parse({"--inline-execution-max-us", bad}, &other), 0) << bad;
  }
  // CLI::PositiveNumber let -1 through as 2^64-1: a body limit of no limit at all.
  for (const char* bad : {"-1", "0", "1099511627777"}) {
    ServeFlags other;
    EXPECT_NE(Parse({"--max-body-bytes", bad}, &other), 0) << bad;
  }
  ASSERT_EQ(Parse({"--max-body-bytes", "1099511627776"}, &flags), 0);
  EXPECT_EQ(flags.max_body_bytes, uint64_t{1} << 40);
}

// A refused value's message names the range in digits a person reads (CLI::PositiveNumber's
// printed a 300-digit double).
TEST(ServeFlagsTest, RangeMessagesAreReadable) {
  for (const char* flag : {"--max-body-bytes", "--max-tensor-elements", "--max-inflight"}) {
    CLI::App app{"harrier"};
    CLI::App* serve = app.add_subcommand("serve");
    ServeFlags flags;
    AddServeFlags(serve, &flags);
    std::vector<std::string> args = {"serve", "--model-repository", "/repo", flag, "-5"};
    std::reverse(args.begin(), args.end());
    std::string message;
    try {
      app.parse(args);
    } catch (const CLI::ParseError& e) {
      message = e.what();
    }
    EXPECT_FALSE(message.empty()) << flag;
    EXPECT_LT(message.size(), 120u) << message;
    EXPECT_EQ(message.find(".000000"), std::string::npos) << message;
  }
}

// Found before any model loads, not once the HTTP port has opened (probe 39).
TEST(ServeFlagsTest, ListenersNeedIpAddressesAndPortsOfTheirOwn) {
  ServeFlags flags;
  EXPECT_EQ(CheckListeners(flags), "");
  flags.grpc_port = 8000;
  EXPECT_EQ(CheckListeners(flags),
            "--http-port and --grpc-port are both 8000 on overlapping addresses: each listener "
            "needs a port of its own");
  flags.grpc_address = "127.0.0.2";  // still within --http-address's 0.0.0.0
  EXPECT_NE(CheckListeners(flags), "");
  flags.http_address = "127.0.0.1";  // two addresses of their own: fine
  EXPECT_EQ(CheckListeners(flags), "");
  flags = ServeFlags();
  flags.metrics_port = 8000;
  flags.plain_http = "off";  // no plain listener to meet
  flags.tls_cert = "c";
  flags.tls_key = "k";
  EXPECT_EQ(CheckListeners(flags), "");
  flags.https_port = 8000;
  EXPECT_EQ(CheckListeners(flags),
            "--https-port and --metrics-port are both 8000 on overlapping addresses: each "
            "listener needs a port of its own");
  flags = ServeFlags();
  flags.http_port = flags.grpc_port = flags.metrics_port = 0;  // each picks a free one
  EXPECT_EQ(CheckListeners(flags), "");
  flags.grpc_address = "999.1.1.1";
  EXPECT_EQ(CheckListeners(flags), "--grpc-address '999.1.1.1' is not an IP address");
  flags = ServeFlags();
  flags.http_address = "bogus";
  EXPECT_EQ(CheckListeners(flags), "--http-address 'bogus' is not an IP address");
  flags.http_address = "::";
  flags.metrics_address = "127.0.0.1";
  flags.metrics_port = 8001;  // gRPC's, on the wildcard, which covers IPv4 too
  EXPECT_NE(CheckListeners(flags), "");
  // IPv4's wildcard does not cover an IPv6 address: the kernel binds both (probe 40).
  flags = ServeFlags();
  flags.grpc_address = "::1";
  flags.grpc_port = 8000;
  EXPECT_EQ(CheckListeners(flags), "");
}

// CLI11's Range lets NaN through; --shutdown-delay-secs nan meant no delay (probe 39).
TEST(ServeFlagsTest, FloatFlagsRefuseNan) {
  for (const char* flag : {"--http-header-timeout-secs", "--http-body-timeout-secs",
                           "--http-idle-timeout-secs", "--shutdown-delay-secs",
                           "--generation-heartbeat-secs", "--generation-disconnect-grace-secs",
                           "--generation-stream-retention-secs", "--trace-sample-ratio"}) {
    for (const char* bad : {"nan", "NaN", "-nan", "inf", "", "1x"}) {
      ServeFlags flags;
      EXPECT_NE(Parse({flag, bad}, &flags), 0) << flag << " " << bad;
    }
    ServeFlags flags;
    EXPECT_EQ(Parse({flag, "1"}, &flags), 0) << flag;
  }
}

TEST(ServeFlagsTest, GrpcMaxConnectionsFitsInTheReserveRestLeaves) {
  ServeFlags flags;
  const struct {
    uint64_t descriptors, grpc;
  } cases[] = {{1024, 64}, {65536, 3584}, {256, 32}, {128, 32}, {64, 8}, {1, 1}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.descriptors);
    EXPECT_EQ(
        GrpcMaxConnections(flags, HttpServer::MaxConnectionsFor(c.descriptors), c.descriptors),
        c.grpc);
  }
  flags.max_connections = 10;  // given: both ports take it
  EXPECT_EQ(GrpcMaxConnections(flags, 10, 64), 10u);
}

TEST(ServeFlagsTest, IncomingBodyLimitIsAQuarterOfTheMemoryAtLeastOneLargestBody) {
  ServeFlags flags;  // --max-body-bytes 256 MiB
  EXPECT_EQ(IncomingBodyLimit(flags, uint64_t{24} << 30), uint64_t{6} << 30);
  EXPECT_EQ(IncomingBodyLimit(flags, uint64_t{2} << 30), uint64_t{512} << 20);
  EXPECT_EQ(IncomingBodyLimit(flags, uint64_t{512} << 20), uint64_t{256} << 20);
  flags.max_incoming_body_bytes = 1000;  // given: taken as it is
  EXPECT_EQ(IncomingBodyLimit(flags, uint64_t{24} << 30), 1000u);
  // ... but not below the largest body, which could then never arrive (probe 75).
  EXPECT_EQ(CheckFlagCombinations(flags),
            "--max-incoming-body-bytes 1000 is below --max-body-bytes 268435456: a body of the "
            "largest size could never arrive; raise it, or lower --max-body-bytes");
  flags.max_body_bytes = 1000;
  EXPECT_EQ(CheckFlagCombinations(flags), "");
}

// It was ignored without a word, while the other flags that need another are usage errors.
// Whole numbers are decimal and within their type: CLI11 alone took 0x10, +5 and ' 5', and
// cut a value past int64 to its largest (probe 74).
TEST(ServeFlagsTest, WholeNumberFlagsAreDecimalAndWithinTheirType) {
  for (const char* flag : {"--max-inflight", "--max-tensor-elements", "--trace-queue-size",
                           "--trace-export-interval-ms", "--max-body-bytes", "--http-port"}) {
    for (const char* bad : {"0x10", "+5", " 5", "5 ", "", "1e3", "9223372036854775808",
                            "18446744073709551616", "99999999999999999999"}) {
      ServeFlags flags;
      EXPECT_NE(Parse({flag, bad}, &flags), 0) << flag << " '" << bad << "'";
    }
    ServeFlags flags;
    EXPECT_EQ(Parse({flag, "16"}, &flags), 0) << flag;
  }
  // A leading zero is decimal, not octal (probe 77: CLI11 read 010 as 8).
  ServeFlags flags;
  ASSERT_EQ(Parse({"--max-inflight", "010", "--max-body-bytes", "08"}, &flags), 0);
  EXPECT_EQ(flags.max_inflight, 10);
  EXPECT_EQ(flags.max_body_bytes, 8u);
}

// Given but empty (an unset $VAR) is refused, not taken as "no keys" (probe 74).
TEST(ServeFlagsTest, AnEmptyKeyFileOrAccessLogFileIsRefused) {
  ServeFlags flags;
  ASSERT_EQ(Parse({"--api-key-file", ""}, &flags), 0);
  EXPECT_EQ(CheckFlagCombinations(flags),
            "--api-key-file is empty: give the key file's path (or leave the flag out to serve "
            "without keys)");
  ServeFlags logged;
  ASSERT_EQ(Parse({"--access-log", "on", "--access-log-file", ""}, &logged), 0);
  EXPECT_EQ(CheckFlagCombinations(logged),
            "--access-log-file is empty: give a file (or leave the flag out for stderr)");
  ServeFlags none;
  ASSERT_EQ(Parse({}, &none), 0);
  EXPECT_EQ(CheckFlagCombinations(none), "");
}

TEST(ServeFlagsTest, AccessLogFileNeedsTheAccessLogOn) {
  ServeFlags flags;
  ASSERT_EQ(Parse({"--access-log-file", "/tmp/a.log"}, &flags), 0);
  EXPECT_EQ(CheckFlagCombinations(flags),
            "--access-log-file needs --access-log on (without it nothing is written there)");
  flags.access_log = "on";
  EXPECT_EQ(CheckFlagCombinations(flags), "");
}

TEST(ServeFlagsTest, MetricsTlsTakesOnOrOffAndOnNeedsACertificate) {
  ServeFlags flags;
  ASSERT_EQ(Parse({"--metrics-tls", "on"}, &flags), 0);
  EXPECT_EQ(flags.metrics_tls, "on");
  EXPECT_EQ(CheckFlagCombinations(flags), "--metrics-tls on needs --tls-cert and --tls-key");
  flags.tls_cert = "server.crt";
  flags.tls_key = "server.key";
  EXPECT_EQ(CheckFlagCombinations(flags), "");
  ServeFlags other;
  EXPECT_NE(Parse({"--metrics-tls", "yes"}, &other), 0);
}

// "`harrier serve --help` lists every flag" (README.md), and every flag is documented: each
// option `serve` registers is in its help text and named in docs/ (a flag table or the text).
TEST(ServeFlagsTest, HelpListsEveryFlagAndTheDocsNameEachOne) {
  CLI::App app{"harrier"};
  CLI::App* serve = app.add_subcommand("serve");
  ServeFlags flags;
  AddServeFlags(serve, &flags);
  const std::string help = serve->help();
  std::string docs;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(HARRIER_SOURCE_DIR) / "docs")) {
    if (entry.path().extension() != ".md") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    docs += text.str();
  }
  ASSERT_FALSE(docs.empty());
  int named = 0;
  for (const CLI::Option* option : serve->get_options()) {
    for (const std::string& name : option->get_lnames()) {
      if (name == "help") continue;
      const std::string flag = "--" + name;
      ++named;
      EXPECT_NE(help.find(flag), std::string::npos) << flag << " is not in serve --help";
      // Followed by what ends a flag's name in Markdown: not a longer flag's prefix.
      bool documented = false;
      for (size_t at = docs.find(flag); at != std::string::npos; at = docs.find(flag, at + 1)) {
        const char next = at + flag.size() < docs.size() ? docs[at + flag.size()] : ' ';
        if (next != '-' && !(next >= 'a' && next <= 'z') && !(next >= '0' && next <= '9')) {
          documented = true;
          break;
        }
      }
      EXPECT_TRUE(documented) << flag << " is named nowhere in docs/";
    }
  }
  EXPECT_GE(named, 50);  // the serve flags there are today, give or take
}

}  // namespace
}  // namespace harrier
