#include "backends/onnxruntime/onnxruntime_types.h"

#include <gtest/gtest.h>

namespace harrier::ort {
namespace {

// What a client reads when ONNX Runtime fails: the call's context and ORT's own words, without
// the newline ORT ends some messages with, under the code the call site decides.
TEST(StatusFromOrtExceptionTest, NamesTheCallAndDropsTrailingNewlines) {
  const Status run = StatusFromOrtException(
      Ort::Exception("Non-zero status code returned while running Reshape node.\n", ORT_FAIL),
      OrtCallSite::kRun, "running the model");
  EXPECT_EQ(run.code(), StatusCode::kInternal);
  EXPECT_EQ(run.message(),
            "running the model: Non-zero status code returned while running Reshape node.");
  const Status bad_input =
      StatusFromOrtException(Ort::Exception("Got invalid dimensions \n\n", ORT_INVALID_ARGUMENT),
                             OrtCallSite::kRun, "running the model");
  EXPECT_EQ(bad_input.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_input.message(), "running the model: Got invalid dimensions");
}

TEST(StatusFromOrtExceptionTest, ALoadFailureIsABadModelOrAMissingFile) {
  EXPECT_EQ(StatusFromOrtException(Ort::Exception("no such file", ORT_NO_SUCHFILE),
                                   OrtCallSite::kLoad, "m")
                .code(),
            StatusCode::kNotFound);
  for (OrtErrorCode code : {ORT_FAIL, ORT_INVALID_ARGUMENT, ORT_INVALID_PROTOBUF, ORT_INVALID_GRAPH,
                            ORT_NOT_IMPLEMENTED, ORT_NO_MODEL}) {
    EXPECT_EQ(StatusFromOrtException(Ort::Exception("x", code), OrtCallSite::kLoad, "m").code(),
              StatusCode::kInvalidArgument)
        << code;
  }
  EXPECT_EQ(
      StatusFromOrtException(Ort::Exception("x", ORT_RUNTIME_EXCEPTION), OrtCallSite::kLoad, "m")
          .code(),
      StatusCode::kInternal);
}

}  // namespace
}  // namespace harrier::ort
