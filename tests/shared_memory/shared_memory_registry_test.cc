#include "shared_memory/shared_memory_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "util/shm_object.h"

namespace harrier {
namespace {

using ::harrier::testing::ShmObject;
using ::testing::HasSubstr;

// Mappings of `key` in this process (/proc/self/maps names them /dev/shm/<key>).
int MappingsOf(const std::string& key) {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.size() >= key.size() && line.compare(line.size() - key.size(), key.size(), key) == 0)
      ++n;
  }
  return n;
}

void ExpectInvalid(const Status& s, const std::string& fragment) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr(fragment));
}

// Probe 62: without bounds, windows of one sparse object filled the address space (or the
// kernel's mapping count) and the next allocation aborted the server.
TEST(SharedMemoryRegistryTest, RegionsAndTheirBytesAreBounded) {
  ShmObject object(8192);
  SharedMemoryRegistry registry({.max_regions = 2, .max_mapped_bytes = 4096});
  ASSERT_TRUE(registry.Register("a", object.key(), 0, 1024).ok());
  ExpectInvalid(registry.Register("big", object.key(), 0, 4000),
                "would pass the server's limit of 4096 bytes");
  ASSERT_TRUE(registry.Register("b", object.key(), 1024, 3072).ok());
  ExpectInvalid(registry.Register("c", object.key(), 0, 1), "holds 2 regions, its limit");
  registry.Unregister("b");  // its bytes and its place come back
  EXPECT_TRUE(registry.Register("c", object.key(), 0, 3072).ok());
  registry.UnregisterAll();
  EXPECT_TRUE(registry.Register("d", object.key(), 0, 4096).ok());
}

// Status answers carry names as JSON and protobuf strings (probe 62: one name that was not
// UTF-8 made every client's status answer unreadable).
TEST(SharedMemoryRegistryTest, ANameThatIsNotUtf8IsRefused) {
  ShmObject object(64);
  SharedMemoryRegistry registry;
  ExpectInvalid(registry.Register("bad\xff", object.key(), 0, 64), "not UTF-8");
  EXPECT_TRUE(registry.Register("caf\xc3\xa9", object.key(), 0, 64).ok());
}

// Registering allocates nothing (probe 65: backing the window at registration charged it to
// the server's memory cgroup, and one large window got the server OOM-killed). Before a request
// touches a window its pages are faulted in: a page the object lost is an error there, not
// SIGBUS on the access (probe 62).
TEST(SharedMemoryRegistryTest, PagesAreFaultedInPerAccessAndALostPageIsAnError) {
  ShmObject object(1 << 20);
  const std::string path = "/dev/shm" + object.key();
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("out", object.key(), 4096, 65536).ok());
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_blocks, 0);  // still sparse
  auto window = registry.Window("out", 0, 65536);
  ASSERT_TRUE(window.ok());
  EXPECT_TRUE(PopulateWindow(window->data + 100, 1000, /*for_write=*/true).ok());
  EXPECT_TRUE(PopulateWindow(window->data, 65536, /*for_write=*/false).ok());
  ASSERT_EQ(truncate(path.c_str(), 8192), 0);  // the client shrinks it under the mapping
  ExpectInvalid(PopulateWindow(window->data, 65536, /*for_write=*/false),
                "the object no longer has those pages");
  ExpectInvalid(PopulateWindow(window->data + 8192, 10, /*for_write=*/true),
                "or /dev/shm has no room");
  EXPECT_TRUE(PopulateWindow(window->data, 4096, /*for_write=*/true).ok());  // still inside
}

TEST(SharedMemoryRegistryTest, RegisterStatusUnregister) {
  ShmObject object(8192);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("b", object.key(), 0, 64).ok());
  ASSERT_TRUE(registry.Register("a", object.key(), 4096 + 100, 200).ok());
  EXPECT_EQ(registry.size(), 2u);

  auto all = registry.Regions("");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "a");  // ordered by name
  EXPECT_EQ((*all)[0].key, object.key());
  EXPECT_EQ((*all)[0].offset, 4096u + 100);
  EXPECT_EQ((*all)[0].byte_size, 200u);
  EXPECT_EQ((*all)[1].name, "b");

  auto one = registry.Regions("b");
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].byte_size, 64u);

  registry.Unregister("b");
  EXPECT_EQ(registry.size(), 1u);
  ExpectInvalid(registry.Regions("b").status(), "Unable to find system shared memory region: 'b'");
  registry.UnregisterAll();
  EXPECT_EQ(registry.size(), 0u);
  EXPECT_EQ(MappingsOf(object.key()), 1);  // the test's own mapping only
}

TEST(SharedMemoryRegistryTest, WindowsSeeTheClientsBytesAtAnyOffset) {
  ShmObject object(3 * 4096);
  for (size_t i = 0; i < object.size(); ++i) object.data()[i] = std::byte(i % 251);
  SharedMemoryRegistry registry;
  // An offset that is not page-aligned: the mapping starts at its page.
  ASSERT_TRUE(registry.Register("r", object.key(), 4096 + 7, 1000).ok());
  auto w = registry.Window("r", 10, 20);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->region, "r");
  EXPECT_EQ(w->offset, 10u);
  EXPECT_EQ(w->byte_size, 20u);
  EXPECT_EQ(std::memcmp(w->data, object.data() + 4096 + 7 + 10, 20), 0);
  // Written through the window, seen by the client: the mapping is shared and writable.
  w->data[0] = std::byte{0xAB};
  EXPECT_EQ(object.data()[4096 + 17], std::byte{0xAB});
  // The whole region, and an empty span at its end.
  EXPECT_TRUE(registry.Window("r", 0, 1000).ok());
  EXPECT_TRUE(registry.Window("r", 1000, 0).ok());
}

TEST(SharedMemoryRegistryTest, RefusesBadRegistrationsAndChangesNothing) {
  ShmObject object(100);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 100).ok());

  ExpectInvalid(registry.Register("r", object.key(), 0, 10),
                "shared memory region 'r' already in manager");
  ExpectInvalid(registry.Register("x", "/harrier_test_no_such_object", 0, 10),
                "Unable to open shared memory region: '/harrier_test_no_such_object'");
  ExpectInvalid(registry.Register("x", object.key(), 50, 51),
                "failed to register shared memory region 'x': invalid args");
  ExpectInvalid(registry.Register("x", object.key(), 101, 1), "invalid args");
  ExpectInvalid(registry.Register("x", object.key(), 0, 0), "byte_size is 0");
  ExpectInvalid(registry.Register("x", object.key(), UINT64_MAX, 2), "overflows");
  ExpectInvalid(registry.Register("", object.key(), 0, 1), "empty name");
  ExpectInvalid(registry.Register("x", "", 0, 1), "the key is empty");
  ExpectInvalid(registry.Register("", "", 0, 0), "Unable to open shared memory region: ''");
  for (const char* key : {"/", "/..", "/../etc/passwd", "a/b", "//x/y"}) {
    ExpectInvalid(registry.Register("x", key, 0, 1), "is not a shared-memory object name");
  }

  EXPECT_EQ(registry.size(), 1u);
  auto r = registry.Regions("");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].byte_size, 100u);
  EXPECT_EQ(MappingsOf(object.key()), 2);  // the test's and the one region's: no leak
}

TEST(SharedMemoryRegistryTest, UnregisteringAnUnknownRegionDoesNothing) {
  ShmObject object(16);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 16).ok());
  registry.Unregister("other");
  registry.Unregister("r");
  registry.Unregister("r");  // twice: still nothing to do
  EXPECT_EQ(registry.size(), 0u);
  // The name is free again.
  EXPECT_TRUE(registry.Register("r", object.key(), 0, 8).ok());
}

TEST(SharedMemoryRegistryTest, WindowRefusesUnknownRegionsAndSpansOutside) {
  ShmObject object(64);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 64).ok());
  ExpectInvalid(registry.Window("q", 0, 1).status(), "Unable to find shared memory region: 'q'");
  ExpectInvalid(registry.Window("r", 0, 65).status(),
                "Invalid offset + byte size for shared memory region: 'r'");
  ExpectInvalid(registry.Window("r", 60, 5).status(), "Invalid offset + byte size");
  ExpectInvalid(registry.Window("r", 65, 0).status(), "Invalid offset + byte size");
  ExpectInvalid(registry.Window("r", 8, UINT64_MAX).status(), "Invalid offset + byte size");
}

TEST(SharedMemoryRegistryTest, ARegionInUseStaysMappedUntilItsLastUserLetsGo) {
  ShmObject object(4096);
  std::memset(object.data(), 7, 4096);
  auto registry = std::make_unique<SharedMemoryRegistry>();
  ASSERT_TRUE(registry->Register("r", object.key(), 0, 4096).ok());
  EXPECT_EQ(MappingsOf(object.key()), 2);

  auto in_flight = registry->Window("r", 0, 4096);  // a request reading the region
  ASSERT_TRUE(in_flight.ok());
  registry->Unregister("r");
  EXPECT_EQ(registry->size(), 0u);                 // gone from status at once
  EXPECT_EQ(MappingsOf(object.key()), 2);          // but still mapped for the request
  EXPECT_EQ(in_flight->data[4095], std::byte{7});  // and readable
  EXPECT_TRUE(registry->Register("r", object.key(), 0, 16).ok());  // the name is free
  EXPECT_EQ(MappingsOf(object.key()), 3);

  in_flight->pin.reset();  // the request is done: the old mapping goes
  EXPECT_EQ(MappingsOf(object.key()), 2);
  registry.reset();  // shutdown: every region unmapped
  EXPECT_EQ(MappingsOf(object.key()), 1);
}

TEST(SharedMemoryRegistryTest, ConcurrentRegistrationsOfOneNameMapOnce) {
  ShmObject object(4096);
  SharedMemoryRegistry registry;
  std::vector<std::thread> threads;
  std::atomic<int> registered{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      if (registry.Register("r", object.key(), 0, 4096).ok()) ++registered;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(registered.load(), 1);
  EXPECT_EQ(MappingsOf(object.key()), 2);
}

}  // namespace
}  // namespace harrier
