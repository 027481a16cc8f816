#include "protocol/kserve/infer_response_encoder.h"

#include <cstring>
#include <string_view>
#include <vector>

#include "core/json_writer.h"
#include "core/utf8.h"
#include "harrier/inline_vector.h"
#include "protocol/kserve/float16.h"

namespace harrier::kserve {
namespace {

bool WantsBinary(const Tensor& output, const InferenceRequest& request) {
  for (const RequestedOutput& r : request.outputs) {
    if (r.name == output.name) return r.binary_data;
  }
  return request.binary_data_output;
}

// Most characters one element takes in JSON, with its comma.
size_t MaxJsonCharsPerElement(DataType type) {
  switch (type) {
    case DataType::kBool: return 6;   // false,
    case DataType::kUint8: return 4;  // 255,
    case DataType::kInt8: return 5;   // -128,
    case DataType::kUint16: return 6;
    case DataType::kInt16: return 7;
    case DataType::kUint32: return 11;
    case DataType::kInt32: return 12;
    case DataType::kUint64:
    case DataType::kInt64: return 21;
    case DataType::kFp16:
    case DataType::kBf16:
    case DataType::kFp32: return 16;  // -1.17549435e-38,
    case DataType::kFp64: return 25;  // -2.2250738585072014e-308,
    case DataType::kBytes:
    case DataType::kInvalid: return 0;  // sized from the data
  }
  return 0;
}

size_t MaxParametersSize(const Parameters& params) {
  size_t n = 2;
  for (const auto& [key, value] : params) {
    n += JsonStringMaxSize(key.size()) + 2;
    if (const auto* s = std::get_if<std::string>(&value)) {
      n += JsonStringMaxSize(s->size());
    } else {
      n += 32;
    }
  }
  return n;
}

void AppendParameters(std::string* out, const Parameters& params) {
  out->push_back('{');
  bool first = true;
  for (const auto& [key, value] : params) {
    if (!first) out->push_back(',');
    first = false;
    AppendJsonKey(out, key);
    std::visit(
        [out](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, bool>) {
            AppendJsonBool(out, v);
          } else if constexpr (std::is_same_v<V, std::string>) {
            AppendJsonString(out, v);
          } else {
            AppendJsonNumber(out, v);
          }
        },
        value);
  }
  out->push_back('}');
}

template <typename T, typename Convert>
void AppendValues(std::string* out, const std::byte* data, int64_t n, Convert convert) {
  out->push_back('[');
  for (int64_t i = 0; i < n; ++i) {
    if (i) out->push_back(',');
    T v;
    std::memcpy(&v, data + i * sizeof(T), sizeof(T));  // outputs may be unaligned views
    convert(out, v);
  }
  out->push_back(']');
}

template <typename T>
void AppendNumbers(std::string* out, const std::byte* data, int64_t n) {
  AppendValues<T>(out, data, n, [](std::string* o, T v) { AppendJsonNumber(o, v); });
}

// Appends BYTES elements as JSON strings. REQUIRES: the layout was validated.
Status AppendBytesStrings(std::string* out, const Tensor& t, int64_t n) {
  out->push_back('[');
  size_t pos = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t len;
    std::memcpy(&len, t.data + pos, 4);
    std::string_view s(reinterpret_cast<const char*>(t.data) + pos + 4, len);
    pos += 4 + len;
    if (!IsValidUtf8(s)) {
      return InvalidArgument("output '" + t.name + "': BYTES element " + std::to_string(i) +
                             " is not valid UTF-8 and cannot be sent as JSON; request the "
                             "output with parameter \"binary_data\": true");
    }
    if (i) out->push_back(',');
    AppendJsonString(out, s);
  }
  out->push_back(']');
  return Status::Ok();
}

Status AppendData(std::string* out, const Tensor& t, int64_t n) {
  const std::byte* d = t.data;
  switch (t.dtype) {
    case DataType::kBool:
      AppendValues<uint8_t>(out, d, n, [](std::string* o, uint8_t v) { AppendJsonBool(o, v); });
      return Status::Ok();
    case DataType::kUint8: AppendNumbers<uint8_t>(out, d, n); return Status::Ok();
    case DataType::kUint16: AppendNumbers<uint16_t>(out, d, n); return Status::Ok();
    case DataType::kUint32: AppendNumbers<uint32_t>(out, d, n); return Status::Ok();
    case DataType::kUint64: AppendNumbers<uint64_t>(out, d, n); return Status::Ok();
    case DataType::kInt8: AppendNumbers<int8_t>(out, d, n); return Status::Ok();
    case DataType::kInt16: AppendNumbers<int16_t>(out, d, n); return Status::Ok();
    case DataType::kInt32: AppendNumbers<int32_t>(out, d, n); return Status::Ok();
    case DataType::kInt64: AppendNumbers<int64_t>(out, d, n); return Status::Ok();
    case DataType::kFp32: AppendNumbers<float>(out, d, n); return Status::Ok();
    case DataType::kFp64: AppendNumbers<double>(out, d, n); return Status::Ok();
    case DataType::kFp16:
      AppendValues<uint16_t>(
          out, d, n, [](std::string* o, uint16_t v) { AppendJsonNumber(o, Fp16BitsToFloat(v)); });
      return Status::Ok();
    case DataType::kBf16:
      AppendValues<uint16_t>(
          out, d, n, [](std::string* o, uint16_t v) { AppendJsonNumber(o, Bf16BitsToFloat(v)); });
      return Status::Ok();
    case DataType::kBytes: return AppendBytesStrings(out, t, n);
    case DataType::kInvalid: break;
  }
  return Internal("output '" + t.name + "' has an invalid datatype");
}

// Checks that an output's bytes match its shape and datatype (the backend's promise).
StatusOr<int64_t> CheckOutput(const Tensor& t) {
  const std::optional<int64_t> n = ElementCount(t.shape);
  if (!n) {
    return Internal("output '" + t.name + "' has an invalid shape " + ShapeToString(t.shape));
  }
  if (t.dtype == DataType::kInvalid) return Internal("output '" + t.name + "' has no datatype");
  if (t.size_bytes > 0 && t.data == nullptr) return Internal("output '" + t.name + "' has no data");
  if (t.dtype == DataType::kBytes) {
    Status s = ValidateBytesTensor(t.bytes(), *n);
    if (!s.ok()) return Internal("output '" + t.name + "': " + s.message());
  } else if (t.size_bytes != static_cast<uint64_t>(*n) * DataTypeByteSize(t.dtype)) {
    return Internal("output '" + t.name + "' holds " + std::to_string(t.size_bytes) +
                    " bytes but shape " + ShapeToString(t.shape) + " of " +
                    std::string(DataTypeName(t.dtype)) + " needs " +
                    std::to_string(static_cast<uint64_t>(*n) * DataTypeByteSize(t.dtype)));
  }
  return *n;
}

}  // namespace

StatusOr<EncodedResponse> EncodeInferResponse(const InferenceResponse& response,
                                              const InferenceRequest& request,
                                              std::span<const SharedMemoryOutput> shared_memory) {
  const std::string& id = response.id.empty() ? request.id : response.id;
  struct Plan {
    int64_t elements = 0;
    bool binary = false;
    const SharedMemoryOutput* shared_memory = nullptr;  // null: the data travels in the body
  };
  InlineVector<Plan, 8> plan;  // a model's few outputs: no allocation

  // Size the body before writing it, so that the reserve below is the only allocation.
  size_t json_max = 128 + JsonStringMaxSize(response.model_name.size()) +
                    JsonStringMaxSize(id.size()) + MaxParametersSize(response.parameters);
  size_t binary_size = 0;
  for (const Tensor& t : response.outputs) {
    ASSIGN_OR_RETURN(const int64_t n, CheckOutput(t));
    const SharedMemoryOutput* region = FindSharedMemoryOutput(shared_memory, t.name);
    if (region != nullptr) RETURN_IF_ERROR(CheckSharedMemoryOutput(t, *region));
    const bool binary = region == nullptr && WantsBinary(t, request);
    plan.push_back({n, binary, region});
    json_max += 128 + JsonStringMaxSize(t.name.size()) + 21 * t.shape.size();
    if (region != nullptr) {
      // metadata only
    } else if (binary) {
      binary_size += t.size_bytes;
    } else if (t.dtype == DataType::kBytes) {
      json_max += 6 * t.size_bytes + 3 * static_cast<size_t>(n);  // 4-byte prefix -> 2 quotes
    } else {
      json_max += MaxJsonCharsPerElement(t.dtype) * static_cast<size_t>(n);
    }
  }

  EncodedResponse encoded;
  std::string& out = encoded.body;
  out.reserve(json_max + binary_size);
  out.append("{\"model_name\":");
  AppendJsonString(&out, response.model_name);
  out.append(",\"model_version\":\"");
  AppendJsonNumber(&out, response.model_version);
  out.push_back('"');
  if (!id.empty()) {
    out.append(",\"id\":");
    AppendJsonString(&out, id);
  }
  if (!response.parameters.empty()) {
    out.append(",\"parameters\":");
    AppendParameters(&out, response.parameters);
  }
  out.append(",\"outputs\":[");
  for (size_t i = 0; i < response.outputs.size(); ++i) {
    const Tensor& t = response.outputs[i];
    if (i) out.push_back(',');
    out.append("{\"name\":");
    AppendJsonString(&out, t.name);
    out.append(",\"datatype\":\"");
    out.append(DataTypeName(t.dtype));
    out.append("\",\"shape\":[");
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (d) out.push_back(',');
      AppendJsonNumber(&out, t.shape[d]);
    }
    out.push_back(']');
    if (plan[i].shared_memory != nullptr) {
      // Written below, once no output can fail any more.
    } else if (plan[i].binary) {
      out.append(",\"parameters\":{\"binary_data_size\":");
      AppendJsonNumber(&out, t.size_bytes);
      out.push_back('}');
      encoded.binary = true;
    } else {
      out.append(",\"data\":");
      RETURN_IF_ERROR(AppendData(&out, t, plan[i].elements));
    }
    out.push_back('}');
  }
  out.append("]}");
  // Only now, with every output encoded: no region is written by a failed encode (a later JSON
  // output's BYTES that are not UTF-8 failed after an earlier output's region was written).
  // Every output fits its window (checked above).
  for (size_t i = 0; i < response.outputs.size(); ++i) {
    if (plan[i].shared_memory != nullptr)
      WriteSharedMemoryOutput(response.outputs[i], *plan[i].shared_memory);
  }
  encoded.json_header_length = out.size();
  for (size_t i = 0; i < response.outputs.size(); ++i) {
    if (!plan[i].binary) continue;
    const Tensor& t = response.outputs[i];
    if (t.size_bytes > 0) out.append(reinterpret_cast<const char*>(t.data), t.size_bytes);
  }
  return encoded;
}

}  // namespace harrier::kserve
