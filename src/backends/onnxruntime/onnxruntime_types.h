// Conversions between ONNX Runtime's vocabulary and Harrier's: element types, tensor type
// information, and Ort::Exception -> Status. Internal to the ONNX Runtime backend.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <optional>
#include <string>
#include <string_view>

#include "harrier/backend.h"
#include "harrier/data_type.h"
#include "harrier/status.h"

namespace harrier::ort {

// The ONNX element type of a Harrier type: FP16/BF16 are ONNX FLOAT16/BFLOAT16 (raw 2-byte
// values), BYTES is STRING. nullopt for kInvalid.
std::optional<ONNXTensorElementDataType> ToOnnxElementType(DataType type);

// The Harrier type of an ONNX element type; nullopt for the types Harrier does not serve
// (complex, float8, int4/uint4, float4, int2/uint2, undefined).
std::optional<DataType> FromOnnxElementType(ONNXTensorElementDataType type);

// "FLOAT", "FLOAT8E4M3FN", ... (ONNX's names), for messages.
std::string_view OnnxElementTypeName(ONNXTensorElementDataType type);

// The spec of one model input or output. `kind` is "input" or "output", for messages.
// kInvalidArgument, naming the tensor and its type, when it is not a tensor (sequence, map,
// optional, ...) or its element type has no Harrier DataType.
// Dims: -1 for symbolic or unknown dims; a tensor whose rank the model leaves unknown gets an
// empty dims list (indistinguishable from a scalar; ONNX Runtime reports no rank).
StatusOr<TensorSpec> SpecFromTypeInfo(std::string name, const Ort::ConstTypeInfo& info,
                                      std::string_view kind);

// The inputs and outputs of a loaded session, in the model's order, and its overridable
// initializers as defaulted inputs. kInvalidArgument as SpecFromTypeInfo (for an input or an
// output). May throw Ort::Exception (the caller catches it).
StatusOr<ModelSignature> ReadSignature(const Ort::Session& session);

// Where an ONNX Runtime call failed; decides how its error code maps to a Status.
enum class OrtCallSite {
  // Reading or building a session from a model file. ORT_NO_SUCHFILE -> kNotFound; errors
  // that describe a bad model (protobuf, graph, invalid argument, not implemented, fail) ->
  // kInvalidArgument; anything else -> kInternal.
  kLoad,
  // Session::Run. ORT_INVALID_ARGUMENT -> kInvalidArgument, anything else -> kInternal.
  kRun,
};

// The Status for an exception thrown by the ONNX Runtime C++ API, as
// "<context>: <ONNX Runtime's message>", without the places in ONNX Runtime's own source that
// the message names (WithoutOrtSourceLocations).
Status StatusFromOrtException(const Ort::Exception& e, OrtCallSite site, std::string_view context);

// ONNX Runtime's message without where in its own source the error was raised. Its ORT_ENFORCE
// and ORT_THROW errors read "/onnxruntime_src/.../reshape_helper.h:84 onnxruntime::
// ReshapeHelper::ReshapeHelper(const onnxruntime::TensorShape&, ...) size != 0 && ... was
// false. The input tensor cannot be reshaped ...": the build's path, a C++ signature and the
// failed condition are ORT's internals, which a client cannot act on (probe 29). Each such
// location is cut, with the signature after it and the condition up to "was false. ".
std::string WithoutOrtSourceLocations(std::string_view message);

// ONNX Runtime says "system error number 13" for a model file it cannot open; that becomes
// "Permission denied (errno 13)" (probe 39).
std::string WithErrnoNames(std::string message);

}  // namespace harrier::ort
