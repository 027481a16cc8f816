#include "auth/api_key_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace harrier::auth {
namespace {

namespace fs = std::filesystem;

std::string KeyJson(std::string_view id, std::string_view key, std::string_view scopes,
                    std::string_view rate_limit = "") {
  std::string out = "{\"id\": \"" + std::string(id) + "\", \"sha256\": \"" +
                    Sha256Hex(Sha256(key)) + "\", \"scopes\": [" + std::string(scopes) + "]";
  if (!rate_limit.empty()) out += ", \"rate_limit\": \"" + std::string(rate_limit) + "\"";
  return out + "}";
}

class ApiKeyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("harrier_api_keys_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    path_ = (dir_ / "keys.json").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Replaces the file as a deployment would: written beside it, then renamed over it.
  void WriteKeys(const std::string& text) {
    const std::string tmp = path_ + ".new";
    std::ofstream(tmp, std::ios::binary | std::ios::trunc) << text;
    fs::rename(tmp, path_);
  }

  std::unique_ptr<ApiKeyStore> Open() {
    ApiKeyStore::Options options;
    options.path = path_;
    options.poll_interval = std::chrono::milliseconds(0);  // the test polls
    auto store = ApiKeyStore::Create(options);
    EXPECT_TRUE(store.ok()) << store.status().message();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  static std::string IdOf(const ApiKeyStore& store, std::string_view key) {
    auto keys = store.keys();
    const ApiKeyStore::Key* found = ApiKeyStore::Find(*keys, key);
    return found ? found->entry.id : "";
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(ApiKeyStoreTest, FindsAKeyByItsBytes) {
  WriteKeys("{\"keys\": [" + KeyJson("a", "key-a", "\"inference\"") + "," +
            KeyJson("b", "key-b", "\"admin\"") + "," + KeyJson("c", "key-c", "\"metrics\"") + "]}");
  auto store = Open();
  ASSERT_TRUE(store);
  auto keys = store->keys();
  const ApiKeyStore::Key* a = ApiKeyStore::Find(*keys, "key-a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->entry.id, "a");
  EXPECT_EQ(ApiKeyStore::Find(*keys, "key-x"), nullptr);
  EXPECT_EQ(IdOf(*store, "key-b"), "b");
  EXPECT_EQ(IdOf(*store, "key-c"), "c");
  EXPECT_EQ(IdOf(*store, "key-c "), "");                    // the exact bytes
  EXPECT_EQ(IdOf(*store, Sha256Hex(Sha256("key-a"))), "");  // the digest is not the key
}

TEST_F(ApiKeyStoreTest, AFileThatDoesNotParseAtStartIsAnError) {
  WriteKeys("{\"keys\": [" + KeyJson("a", "k", "\"nope\"") + "]}");
  ApiKeyStore::Options options;
  options.path = path_;
  options.poll_interval = std::chrono::milliseconds(0);
  auto store = ApiKeyStore::Create(options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(store.status().message().find("unknown scope 'nope'"), std::string::npos);
  EXPECT_NE(store.status().message().find(path_), std::string::npos);

  options.path = (dir_ / "missing.json").string();
  auto missing = ApiKeyStore::Create(options);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST_F(ApiKeyStoreTest, RotatesWhenTheFileChanges) {
  WriteKeys("{\"keys\": [" + KeyJson("old", "key-1", "\"inference\"") + "]}");
  auto store = Open();
  ASSERT_TRUE(store);
  EXPECT_FALSE(store->CheckForChange());  // unchanged
  EXPECT_EQ(IdOf(*store, "key-1"), "old");

  WriteKeys("{\"keys\": [" + KeyJson("new", "key-2", "\"inference\"") + "]}");
  EXPECT_TRUE(store->CheckForChange());
  EXPECT_EQ(IdOf(*store, "key-1"), "");
  EXPECT_EQ(IdOf(*store, "key-2"), "new");
  EXPECT_EQ(store->reloads(), 1u);
  EXPECT_FALSE(store->CheckForChange());
}

TEST_F(ApiKeyStoreTest, AnInPlaceRewriteIsSeenToo) {
  WriteKeys("{\"keys\": [" + KeyJson("a", "key-1", "\"inference\"") + "]}");
  auto store = Open();
  ASSERT_TRUE(store);
  {  // same inode, a different size
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out << "{\"keys\": [" << KeyJson("a", "key-1", "\"inference\"") << ","
        << KeyJson("b", "key-2", "\"admin\"") << "]}";
  }
  EXPECT_TRUE(store->CheckForChange());
  EXPECT_EQ(IdOf(*store, "key-2"), "b");
}

TEST_F(ApiKeyStoreTest, ABadFileKeepsTheOldKeysUntilAGoodOneComes) {
  WriteKeys("{\"keys\": [" + KeyJson("a", "key-1", "\"inference\"") + "]}");
  auto store = Open();
  ASSERT_TRUE(store);
  WriteKeys("{\"keys\": [ not json");
  EXPECT_FALSE(store->CheckForChange());
  EXPECT_EQ(store->failed_reloads(), 1u);
  EXPECT_EQ(IdOf(*store, "key-1"), "a");
  EXPECT_FALSE(store->CheckForChange());  // the same bad file: not read (or counted) again
  EXPECT_EQ(store->failed_reloads(), 1u);

  fs::remove(path_);  // a file that went away keeps the keys as well
  EXPECT_FALSE(store->CheckForChange());
  EXPECT_EQ(IdOf(*store, "key-1"), "a");

  WriteKeys("{\"keys\": [" + KeyJson("b", "key-2", "\"inference\"") + "]}");
  EXPECT_TRUE(store->CheckForChange());
  EXPECT_EQ(IdOf(*store, "key-1"), "");
  EXPECT_EQ(IdOf(*store, "key-2"), "b");
}

TEST_F(ApiKeyStoreTest, AKeyKeepsItsBucketAndCountersAcrossAReload) {
  WriteKeys("{\"keys\": [" + KeyJson("a", "key-1", "\"inference\"", "1:1") + "]}");
  auto store = Open();
  ASSERT_TRUE(store);
  std::shared_ptr<TokenBucket> bucket = store->keys()->at(0).bucket;
  std::shared_ptr<KeyCounters> counters = store->keys()->at(0).counters;
  ASSERT_TRUE(bucket);
  counters->allowed = 7;

  // The same id and limit, another scope: the bucket stays (no fresh burst from a rotation).
  WriteKeys("{\"keys\": [" + KeyJson("a", "key-1", "\"metadata\"", "1:1") + "]}");
  ASSERT_TRUE(store->CheckForChange());
  EXPECT_EQ(store->keys()->at(0).bucket, bucket);
  EXPECT_EQ(store->keys()->at(0).counters, counters);

  // A new limit: a new bucket. The counters are the id's, whatever its limit.
  WriteKeys("{\"keys\": [" + KeyJson("a", "key-1", "\"metadata\"", "5:10") + "]}");
  ASSERT_TRUE(store->CheckForChange());
  EXPECT_NE(store->keys()->at(0).bucket, bucket);
  EXPECT_EQ(store->keys()->at(0).counters, counters);

  // A key removed takes its series with it (ids that come and go across rotations must not add
  // series forever); one that comes back starts from 0.
  WriteKeys("{\"keys\": [" + KeyJson("b", "key-2", "\"metadata\"") + "]}");
  ASSERT_TRUE(store->CheckForChange());
  auto all = store->AllCounters();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].first, "b");
  WriteKeys("{\"keys\": [" + KeyJson("a", "key-1", "\"metadata\"") + "," +
            KeyJson("b", "key-2", "\"metadata\"") + "]}");
  ASSERT_TRUE(store->CheckForChange());
  all = store->AllCounters();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, "a");
  EXPECT_EQ(all[0].second->allowed.load(), 0u);
}

TEST_F(ApiKeyStoreTest, ThePollingThreadPicksUpAChange) {
  WriteKeys("{\"keys\": [" + KeyJson("a", "key-1", "\"inference\"") + "]}");
  ApiKeyStore::Options options;
  options.path = path_;
  options.poll_interval = std::chrono::milliseconds(10);
  auto store = ApiKeyStore::Create(options);
  ASSERT_TRUE(store.ok());
  WriteKeys("{\"keys\": [" + KeyJson("b", "key-2", "\"inference\"") + "]}");
  // Waits on the store's own thread (bounded), not on a fixed sleep.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((*store)->reloads() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(IdOf(**store, "key-2"), "b");
}

}  // namespace
}  // namespace harrier::auth
