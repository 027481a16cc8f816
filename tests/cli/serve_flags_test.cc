#include "cli/serve_flags.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace harrier
