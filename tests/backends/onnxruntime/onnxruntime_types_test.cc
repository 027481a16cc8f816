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

// ORT's ORT_ENFORCE errors name a place in its own source, a C++ signature and a failed
// condition before the words a client can act on; those go (probe 29).
TEST(StatusFromOrtExceptionTest, DropsWhereInOnnxRuntimesSourceTheErrorWasRaised) {
  EXPECT_EQ(
      WithoutOrtSourceLocations(
          "Non-zero status code returned while running Reshape node. Name:'' Status Message: "
          "/onnxruntime_src/onnxruntime/core/providers/cpu/tensor/reshape_helper.h:84 "
          "onnxruntime::ReshapeHelper::ReshapeHelper(const onnxruntime::TensorShape&, "
          "onnxruntime::TensorShapeVector&, bool) size != 0 && (input_shape_size % size) == 0 was "
          "false. The input tensor cannot be reshaped to the requested shape. Input shape:{4}, "
          "requested shape:{3,-1}"),
      "Non-zero status code returned while running Reshape node. Name:'' Status Message: The "
      "input tensor cannot be reshaped to the requested shape. Input shape:{4}, requested "
      "shape:{3,-1}");
  // ORT_THROW: a signature with a return type, no condition.
  EXPECT_EQ(WithoutOrtSourceLocations(
                "Load model failed: /src/onnxruntime/core/graph/model.cc:180 "
                "onnxruntime::common::Status onnxruntime::Model::Load(std::istream&) const "
                "Unknown model file format version."),
            "Load model failed: Unknown model file format version.");
  // After "failed:" with no space, and a signature with templates and a return type (probe 40).
  EXPECT_EQ(
      WithoutOrtSourceLocations(
          "Load model from /m/1/model.onnx failed:/onnxruntime_src/onnxruntime/core/graph/"
          "model_load_utils.h:46 void onnxruntime::model_load_utils::ValidateOpsetForDomain(const "
          "std::unordered_map<std::__cxx11::basic_string<char>, int>&, const "
          "onnxruntime::logging::Logger&, bool, const string&, int) ONNX Runtime only "
          "*guarantees* support for models stamped with official released onnx opset versions."),
      "Load model from /m/1/model.onnx failed:ONNX Runtime only *guarantees* support for models "
      "stamped with official released onnx opset versions.");
  // A bare file name and a bare function name (__FUNCTION__), with parentheses in the message.
  EXPECT_EQ(WithoutOrtSourceLocations(
                "Status Message: matmul_helper.h:59 Compute MatMul dimension mismatch (a::b)"),
            "Status Message: MatMul dimension mismatch (a::b)");
  EXPECT_EQ(WithoutOrtSourceLocations("concatbase.h:133 PrepareForComputeImpl Non concat axis "
                                      "dimensions must match: Axis 1 has mismatched dimensions"),
            "Non concat axis dimensions must match: Axis 1 has mismatched dimensions");
  // A condition is cut only up to its own "was false", never past another location.
  EXPECT_EQ(
      WithoutOrtSourceLocations("a.cc:1 F first message b.cc:2 G x > 0 was false. second message"),
      "first message second message");
  // Paths that are not source locations stay, and so does a message without one.
  EXPECT_EQ(WithoutOrtSourceLocations("Load model from /models/a.onnx failed: bad"),
            "Load model from /models/a.onnx failed: bad");
  EXPECT_EQ(WithoutOrtSourceLocations("see /x/y.cc:12a here"), "see /x/y.cc:12a here");
  EXPECT_EQ(WithoutOrtSourceLocations(""), "");
  EXPECT_EQ(WithoutOrtSourceLocations("/a/b.h:1"), "/a/b.h:1");  // no space after it: kept
}

TEST(StatusFromOrtExceptionTest, NamesTheErrnoOrtGivesAsANumber) {
  EXPECT_EQ(WithErrnoNames("Load model from /m/1/model.onnx failed:system error number 13"),
            "Load model from /m/1/model.onnx failed:Permission denied (errno 13)");
  EXPECT_EQ(WithErrnoNames("system error number 2; system error number 13"),
            "No such file or directory (errno 2); Permission denied (errno 13)");
  EXPECT_EQ(WithErrnoNames("system error number x"), "system error number x");
  EXPECT_EQ(WithErrnoNames("no error here"), "no error here");
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
