#include "shared_memory/shared_memory_tensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "util/shm_object.h"

namespace harrier {
namespace {

using ::testing::HasSubstr;

TEST(SharedMemoryRefOfTest, Table) {
  struct Case {
    Parameters parameters;
    std::string error;  // empty: parses
    uint64_t offset = 0;
  };
  const std::string r = "shared_memory_region", o = "shared_memory_offset",
                    b = "shared_memory_byte_size";
  const std::vector<Case> cases = {
      {{{r, std::string("x")}, {b, int64_t{8}}}, "", 0},
      {{{r, std::string("x")}, {b, int64_t{8}}, {o, int64_t{4}}}, "", 4},
      {{{r, std::string("x")}}, "must specify both"},
      {{{b, int64_t{8}}}, "must specify both"},
      {{{o, int64_t{8}}}, "must specify both"},
      {{{r, int64_t{1}}, {b, int64_t{8}}}, "must be a non-empty string"},
      {{{r, std::string("")}, {b, int64_t{8}}}, "must be a non-empty string"},
      {{{r, std::string("x")}, {b, int64_t{-8}}}, "'shared_memory_byte_size' must be an integer"},
      {{{r, std::string("x")}, {b, 8.0}}, "'shared_memory_byte_size' must be an integer"},
      {{{r, std::string("x")}, {b, int64_t{8}}, {o, std::string("4")}},
       "'shared_memory_offset' must be an integer"},
  };
  for (const Case& c : cases) {
    auto ref = SharedMemoryRefOf(c.parameters, "input 'i'");
    if (c.error.empty()) {
      ASSERT_TRUE(ref.ok()) << ref.status().ToString();
      ASSERT_TRUE(ref->has_value());
      EXPECT_EQ((*ref)->region, "x");
      EXPECT_EQ((*ref)->byte_size, 8u);
      EXPECT_EQ((*ref)->offset, c.offset);
    } else {
      ASSERT_FALSE(ref.ok()) << c.error;
      EXPECT_EQ(ref.status().code(), StatusCode::kInvalidArgument);
      EXPECT_THAT(ref.status().message(), HasSubstr("input 'i': "));
      EXPECT_THAT(ref.status().message(), HasSubstr(c.error));
    }
  }
  auto none = SharedMemoryRefOf({{"binary_data_size", int64_t{3}}}, "input 'i'");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

// A 64-byte object holding one BYTES element, "hi" (6 bytes with its length), registered as
// region "r", and a BYTES tensor "s" of shape [1] to attach to it.
class AttachSharedMemoryInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const uint32_t len = 2;
    std::memcpy(object_.data(), &len, 4);
    std::memcpy(object_.data() + 4, "hi", 2);
    ASSERT_TRUE(registry_.Register("r", object_.key(), 0, 64).ok());
    bytes_.name = "s";
    bytes_.dtype = DataType::kBytes;
    bytes_.shape = {1};
  }
  testing::ShmObject object_{64};
  SharedMemoryRegistry registry_;
  Tensor bytes_;
};

TEST_F(AttachSharedMemoryInputTest, BytesInputsAreValidated) {
  SharedMemoryRegistry& registry = registry_;
  Tensor& t = bytes_;
  ASSERT_TRUE(AttachSharedMemoryInput({&registry, "m"}, {"r", 0, 6}, &t).ok());
  EXPECT_EQ(t.size_bytes, 6u);
  Status s = AttachSharedMemoryInput({&registry, "m"}, {"r", 0, 9}, &t);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("input 's' in shared memory region 'r'"));
}

// A BYTES tensor's element boundaries are in its bytes: what was validated is what the batch
// reads, whatever the client writes to its region after (probe 30). A fixed-size input stays
// in place.
TEST_F(AttachSharedMemoryInputTest, BytesInputsAreCopiedAtValidationOthersReadInPlace) {
  SharedMemoryRegistry& registry = registry_;
  testing::ShmObject& object = object_;
  Tensor& t = bytes_;
  ASSERT_TRUE(AttachSharedMemoryInput({&registry, "m"}, {"r", 0, 6}, &t).ok());
  const uint32_t claims_more = 60;
  std::memcpy(object.data(), &claims_more, 4);
  std::memcpy(object.data() + 4, "HO", 2);
  ASSERT_EQ(t.size_bytes, 6u);
  uint32_t seen = 0;
  std::memcpy(&seen, t.data, 4);
  EXPECT_EQ(seen, 2u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.data) + 4, 2), "hi");

  Tensor fixed;
  fixed.name = "i";
  fixed.dtype = DataType::kInt32;
  fixed.shape = {1};
  ASSERT_TRUE(AttachSharedMemoryInput({&registry, "m"}, {"r", 8, 4}, &fixed).ok());
  const int32_t now = 7;
  std::memcpy(object.data() + 8, &now, 4);
  int32_t read = 0;
  std::memcpy(&read, fixed.data, 4);
  EXPECT_EQ(read, 7);
}

TEST(ResolveSharedMemoryOutputsTest, RefusesClassificationAndUnknownRegions) {
  testing::ShmObject object(64);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r", object.key(), 0, 64).ok());
  RequestedOutput o;
  o.name = "y";
  o.parameters = {{"shared_memory_region", std::string("r")},
                  {"shared_memory_byte_size", int64_t{64}}};
  auto ok = ResolveSharedMemoryOutputs({&registry, "m"}, {o});
  ASSERT_TRUE(ok.ok());
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].name, "y");
  EXPECT_NE(FindSharedMemoryOutput(*ok, "y"), nullptr);
  EXPECT_EQ(FindSharedMemoryOutput(*ok, "z"), nullptr);

  RequestedOutput classified = o;
  classified.classification = 3;
  EXPECT_THAT(ResolveSharedMemoryOutputs({&registry, "m"}, {classified}).status().message(),
              HasSubstr("cannot be combined"));
  RequestedOutput unknown = o;
  unknown.parameters["shared_memory_region"] = std::string("q");
  EXPECT_THAT(ResolveSharedMemoryOutputs({&registry, "m"}, {unknown}).status().message(),
              HasSubstr("Unable to find shared memory region: 'q' (output 'y')"));
  EXPECT_THAT(ResolveSharedMemoryOutputs({nullptr, "m"}, {o}).status().message(),
              HasSubstr("--allow-client-shm=true"));
}

}  // namespace
}  // namespace harrier
