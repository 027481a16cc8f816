#include "backends/onnxruntime/onnxruntime_types.h"

#include <array>
#include <cstring>
#include <string>
#include <utility>

namespace harrier::ort {
namespace {

struct TypePair {
  DataType harrier;
  ONNXTensorElementDataType onnx;
};

constexpr std::array<TypePair, 14> kTypePairs{{
    {DataType::kBool, ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL},
    {DataType::kUint8, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8},
    {DataType::kUint16, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16},
    {DataType::kUint32, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32},
    {DataType::kUint64, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64},
    {DataType::kInt8, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8},
    {DataType::kInt16, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16},
    {DataType::kInt32, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32},
    {DataType::kInt64, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64},
    {DataType::kFp16, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16},
    {DataType::kBf16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16},
    {DataType::kFp32, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT},
    {DataType::kFp64, ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE},
    {DataType::kBytes, ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING},
}};

std::string_view OnnxTypeName(ONNXType type) {
  switch (type) {
    case ONNX_TYPE_TENSOR: return "tensor";
    case ONNX_TYPE_SEQUENCE: return "sequence";
    case ONNX_TYPE_MAP: return "map";
    case ONNX_TYPE_OPAQUE: return "opaque";
    case ONNX_TYPE_SPARSETENSOR: return "sparse tensor";
    case ONNX_TYPE_OPTIONAL: return "optional";
    case ONNX_TYPE_UNKNOWN: break;
  }
  return "unknown type";
}

}  // namespace

std::optional<ONNXTensorElementDataType> ToOnnxElementType(DataType type) {
  for (const auto& p : kTypePairs)
    if (p.harrier == type) return p.onnx;
  return std::nullopt;
}

std::optional<DataType> FromOnnxElementType(ONNXTensorElementDataType type) {
  for (const auto& p : kTypePairs)
    if (p.onnx == type) return p.harrier;
  return std::nullopt;
}

std::string_view OnnxElementTypeName(ONNXTensorElementDataType type) {
  switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED: return "UNDEFINED";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return "FLOAT";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: return "UINT8";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: return "INT8";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: return "UINT16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: return "INT16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return "INT32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return "INT64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING: return "STRING";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL: return "BOOL";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: return "FLOAT16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return "DOUBLE";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: return "UINT32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: return "UINT64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX64: return "COMPLEX64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX128: return "COMPLEX128";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return "BFLOAT16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FN: return "FLOAT8E4M3FN";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FNUZ: return "FLOAT8E4M3FNUZ";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2: return "FLOAT8E5M2";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2FNUZ: return "FLOAT8E5M2FNUZ";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT4: return "UINT4";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT4: return "INT4";
    default: break;  // types newer than this list (FLOAT4E2M1, INT2, ...)
  }
  return "an ONNX element type Harrier does not know";
}

StatusOr<TensorSpec> SpecFromTypeInfo(std::string name, const Ort::ConstTypeInfo& info,
                                      std::string_view kind) {
  const ONNXType onnx_type = info.GetONNXType();
  if (onnx_type != ONNX_TYPE_TENSOR) {
    return InvalidArgument(std::string(kind) + " '" + name + "' is a " +
                           std::string(OnnxTypeName(onnx_type)) +
                           "; Harrier serves tensor inputs and outputs only");
  }
  auto tensor_info = info.GetTensorTypeAndShapeInfo();
  const ONNXTensorElementDataType element_type = tensor_info.GetElementType();
  std::optional<DataType> dtype = FromOnnxElementType(element_type);
  if (!dtype) {
    return InvalidArgument(std::string(kind) + " '" + name + "' has element type " +
                           std::string(OnnxElementTypeName(element_type)) + " (ONNX " +
                           std::to_string(static_cast<int>(element_type)) +
                           "), which Harrier does not support");
  }
  TensorSpec spec;
  spec.name = std::move(name);
  spec.dtype = *dtype;
  if (tensor_info.HasShape()) {
    spec.dims = tensor_info.GetShape();  // ORT reports symbolic and unknown dims as -1
    for (auto& d : spec.dims)
      if (d < 0) d = -1;
  }
  return spec;
}

StatusOr<ModelSignature> ReadSignature(const Ort::Session& session) {
  Ort::AllocatorWithDefaultOptions allocator;
  ModelSignature signature;
  const size_t input_count = session.GetInputCount();
  signature.inputs.reserve(input_count);
  for (size_t i = 0; i < input_count; ++i) {
    Ort::TypeInfo info = session.GetInputTypeInfo(i);
    ASSIGN_OR_RETURN(TensorSpec spec,
                     SpecFromTypeInfo(session.GetInputNameAllocated(i, allocator).get(),
                                      info.GetConst(), "input"));
    signature.inputs.push_back(std::move(spec));
  }
  const size_t output_count = session.GetOutputCount();
  signature.outputs.reserve(output_count);
  for (size_t i = 0; i < output_count; ++i) {
    Ort::TypeInfo info = session.GetOutputTypeInfo(i);
    ASSIGN_OR_RETURN(TensorSpec spec,
                     SpecFromTypeInfo(session.GetOutputNameAllocated(i, allocator).get(),
                                      info.GetConst(), "output"));
    signature.outputs.push_back(std::move(spec));
  }
  // ONNX Runtime lists an initializer that is also a graph input as an "overridable
  // initializer", not an input. One that Harrier cannot serve (a type it has no name for) is
  // left out rather than failing the load: no request could name it anyway.
  const size_t defaulted_count = session.GetOverridableInitializerCount();
  for (size_t i = 0; i < defaulted_count; ++i) {
    Ort::TypeInfo info = session.GetOverridableInitializerTypeInfo(i);
    auto spec = SpecFromTypeInfo(session.GetOverridableInitializerNameAllocated(i, allocator).get(),
                                 info.GetConst(), "input");
    if (spec.ok()) signature.defaulted_inputs.push_back(std::move(spec).value());
  }
  return signature;
}

namespace {

// "/onnxruntime_src/onnxruntime/core/providers/cpu/tensor/reshape_helper.h:84" or
// "matmul_helper.h:59": path characters ending in a source file's extension, a colon and a line
// number.
bool IsSourceLocation(std::string_view word) {
  const std::size_t colon = word.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == word.size()) return false;
  for (char c : word.substr(colon + 1))
    if (c < '0' || c > '9') return false;
  const std::string_view file = word.substr(0, colon);
  for (char c : file) {
    const bool path_char = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                           (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' || c == '/';
    if (!path_char) return false;
  }
  for (std::string_view ext : {".h", ".cc", ".cpp", ".hpp", ".c", ".cu"})
    if (file.ends_with(ext) && file.size() > ext.size()) return true;
  return false;
}

bool IsIdentifierChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Where the function ORT names after a location ends in `m`, from `j`: its C++ signature
// (__PRETTY_FUNCTION__: a qualified name with "::", perhaps a return type before it, then its
// parameters in balanced parentheses, perhaps " const"), or a bare name (__FUNCTION__:
// "Compute"). `j` itself when neither is there.
std::size_t AfterFunction(std::string_view m, std::size_t j) {
  const std::size_t open = m.find('(', j);
  const std::string_view before = open == std::string_view::npos ? "" : m.substr(j, open - j);
  if (open != std::string_view::npos && open - j < 512 &&
      before.find("::") != std::string_view::npos &&
      before.find_first_of(".,;!?\"'") == std::string_view::npos) {
    int depth = 0;
    std::size_t k = open;
    for (; k < m.size(); ++k) {
      if (m[k] == '(') ++depth;
      if (m[k] == ')' && --depth == 0) break;
    }
    if (k < m.size()) {
      k += 1;
      if (m.substr(k).starts_with(" const")) k += 6;
      return k;
    }
  }
  std::size_t k = j;
  while (k < m.size() && IsIdentifierChar(m[k])) ++k;
  // A bare name is followed by the message: cut it only then.
  return k > j && k < m.size() && m[k] == ' ' ? k : j;
}

}  // namespace

std::string WithoutOrtSourceLocations(std::string_view message) {
  constexpr std::string_view kWasFalse = " was false. ";
  std::string out;
  out.reserve(message.size());
  std::size_t i = 0;
  while (i < message.size()) {
    // A location starts the message or follows a space or a colon ("failed:/onnxruntime_src/").
    const bool word_start = i == 0 || message[i - 1] == ' ' || message[i - 1] == ':';
    const std::size_t end = message.find(' ', i);
    if (!word_start || end == std::string_view::npos ||
        !IsSourceLocation(message.substr(i, end - i))) {
      out.push_back(message[i++]);
      continue;
    }
    std::size_t j = AfterFunction(message, end + 1);
    if (j < message.size() && message[j] == ' ') ++j;
    // ORT_ENFORCE's failed condition, "size != 0 && ... was false. ", before its message: only
    // when no other location comes first (ORT_THROW's message has no condition).
    if (const std::size_t was = message.find(kWasFalse, j);
        was != std::string_view::npos && was - j < 1024) {
      bool another = false;
      for (std::size_t w = j; w < was && !another;) {
        const std::size_t space = message.find(' ', w);
        const std::size_t stop = std::min(space == std::string_view::npos ? was : space, was);
        another = IsSourceLocation(message.substr(w, stop - w));
        w = stop + 1;
      }
      if (!another) j = was + kWasFalse.size();
    }
    i = j;
  }
  return out;
}

std::string WithErrnoNames(std::string message) {
  constexpr std::string_view kSystemError = "system error number ";
  for (std::size_t at = message.find(kSystemError); at != std::string::npos;
       at = message.find(kSystemError, at + 1)) {
    const std::size_t digits = at + kSystemError.size();
    std::size_t end = digits;
    while (end < message.size() && end - digits < 4 && message[end] >= '0' && message[end] <= '9')
      ++end;
    if (end == digits) continue;
    const int number = std::stoi(message.substr(digits, end - digits));
    const std::string named = std::string(std::strerror(number)) + " (errno " +
                              message.substr(digits, end - digits) + ")";
    message.replace(at, end - at, named);
    at += named.size() - 1;
  }
  return message;
}

Status StatusFromOrtException(const Ort::Exception& e, OrtCallSite site, std::string_view context) {
  std::string message =
      std::string(context) + ": " + WithErrnoNames(WithoutOrtSourceLocations(e.what()));
  // ONNX Runtime ends some messages with a newline, which would end the client's error text.
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  const OrtErrorCode code = e.GetOrtErrorCode();
  if (site == OrtCallSite::kRun) {
    return code == ORT_INVALID_ARGUMENT ? InvalidArgument(std::move(message))
                                        : Internal(std::move(message));
  }
  switch (code) {
    case ORT_NO_SUCHFILE: return NotFound(std::move(message));
    case ORT_FAIL:  // ORT's generic load failure ("ModelProto does not have a graph", ...)
    case ORT_INVALID_ARGUMENT:
    case ORT_INVALID_PROTOBUF:
    case ORT_INVALID_GRAPH:
    case ORT_NOT_IMPLEMENTED:  // e.g. no kernel for an operator or a type
    case ORT_NO_MODEL: return InvalidArgument(std::move(message));
    default: return Internal(std::move(message));
  }
}

}  // namespace harrier::ort
