#include "protocol/grpc/infer_codec.h"

#include <charconv>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "protocol/kserve/classification.h"
#include "protocol/kserve/scheduling_fields.h"

namespace harrier::grpc_frontend {

namespace {

using inference::InferTensorContents;
using inference::ModelInferRequest;
using inference::ModelInferResponse;

std::string InputContext(const std::string& name) {
  return "input '" + name + "'";
}

// Elements held by each typed field, and which one a datatype uses.
struct TypedCounts {
  int bools, ints, int64s, uints, uint64s, fp32s, fp64s, bytes;
  int Total() const { return bools + ints + int64s + uints + uint64s + fp32s + fp64s + bytes; }
};

TypedCounts CountTyped(const InferTensorContents& c) {
  return {c.bool_contents_size(), c.int_contents_size(),    c.int64_contents_size(),
          c.uint_contents_size(), c.uint64_contents_size(), c.fp32_contents_size(),
          c.fp64_contents_size(), c.bytes_contents_size()};
}

// The typed field a datatype reads and writes; nullptr for FP16/BF16 (raw only).
const char* TypedFieldFor(DataType dtype) {
  switch (dtype) {
    case DataType::kBool: return "bool_contents";
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32: return "int_contents";
    case DataType::kInt64: return "int64_contents";
    case DataType::kUint8:
    case DataType::kUint16:
    case DataType::kUint32: return "uint_contents";
    case DataType::kUint64: return "uint64_contents";
    case DataType::kFp32: return "fp32_contents";
    case DataType::kFp64: return "fp64_contents";
    case DataType::kBytes: return "bytes_contents";
    default: return nullptr;
  }
}

int CountFor(DataType dtype, const TypedCounts& n) {
  switch (dtype) {
    case DataType::kBool: return n.bools;
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32: return n.ints;
    case DataType::kInt64: return n.int64s;
    case DataType::kUint8:
    case DataType::kUint16:
    case DataType::kUint32: return n.uints;
    case DataType::kUint64: return n.uint64s;
    case DataType::kFp32: return n.fp32s;
    case DataType::kFp64: return n.fp64s;
    case DataType::kBytes: return n.bytes;
    default: return 0;
  }
}

// Narrows each value of `values` to T, refusing values outside T's range.
template <typename T, typename Repeated>
Status PackChecked(const Repeated& values, std::byte* out, const std::string& input) {
  for (int i = 0; i < values.size(); ++i) {
    const auto v = values.Get(i);
    if (!std::in_range<T>(v)) {
      return InvalidArgument(InputContext(input) + ": element " + std::to_string(i) + " (" +
                             std::to_string(v) + ") is out of range for its datatype");
    }
    const T narrowed = static_cast<T>(v);
    std::memcpy(out + static_cast<size_t>(i) * sizeof(T), &narrowed, sizeof(T));
  }
  return Status::Ok();
}

template <typename Repeated>
void PackSame(const Repeated& values, std::byte* out) {
  if (values.size() > 0) std::memcpy(out, values.data(), values.size() * sizeof(values.Get(0)));
}

// Typed contents -> a buffer in Harrier's Tensor layout, owned by the tensor.
Status DecodeTyped(const InferTensorContents& c, const std::string& name, Tensor* t) {
  size_t size = 0;
  if (t->dtype == DataType::kBytes) {
    for (const std::string& s : c.bytes_contents()) {
      if (s.size() > std::numeric_limits<uint32_t>::max()) {
        return InvalidArgument(InputContext(name) + ": a BYTES element is over 4 GiB");
      }
      size += 4 + s.size();
    }
  } else {
    size = static_cast<size_t>(CountFor(t->dtype, CountTyped(c))) * DataTypeByteSize(t->dtype);
  }
  std::shared_ptr<std::byte[]> buffer = AllocateTensorBuffer(size == 0 ? 1 : size);
  std::byte* out = buffer.get();
  switch (t->dtype) {
    case DataType::kBool:
      for (int i = 0; i < c.bool_contents_size(); ++i)
        out[i] = std::byte{static_cast<unsigned char>(c.bool_contents(i) ? 1 : 0)};
      break;
    case DataType::kInt8: RETURN_IF_ERROR(PackChecked<int8_t>(c.int_contents(), out, name)); break;
    case DataType::kInt16:
      RETURN_IF_ERROR(PackChecked<int16_t>(c.int_contents(), out, name));
      break;
    case DataType::kInt32: PackSame(c.int_contents(), out); break;
    case DataType::kInt64: PackSame(c.int64_contents(), out); break;
    case DataType::kUint8:
      RETURN_IF_ERROR(PackChecked<uint8_t>(c.uint_contents(), out, name));
      break;
    case DataType::kUint16:
      RETURN_IF_ERROR(PackChecked<uint16_t>(c.uint_contents(), out, name));
      break;
    case DataType::kUint32: PackSame(c.uint_contents(), out); break;
    case DataType::kUint64: PackSame(c.uint64_contents(), out); break;
    case DataType::kFp32: PackSame(c.fp32_contents(), out); break;
    case DataType::kFp64: PackSame(c.fp64_contents(), out); break;
    case DataType::kBytes: {
      std::byte* p = out;
      for (const std::string& s : c.bytes_contents()) {
        const uint32_t n = static_cast<uint32_t>(s.size());
        const unsigned char le[4] = {
            static_cast<unsigned char>(n), static_cast<unsigned char>(n >> 8),
            static_cast<unsigned char>(n >> 16), static_cast<unsigned char>(n >> 24)};
        std::memcpy(p, le, 4);
        if (n) std::memcpy(p + 4, s.data(), n);
        p += 4 + n;
      }
      break;
    }
    case DataType::kFp16:
    case DataType::kBf16:
      // No typed form: only an input with no elements gets here (the caller refuses others),
      // and it has nothing to copy.
      break;
    default: return Internal("DecodeTyped: unexpected datatype");
  }
  t->data = buffer.get();
  t->size_bytes = size;
  t->owner = std::move(buffer);
  return Status::Ok();
}

Status CheckRawSize(const Tensor& t, int64_t elements) {
  if (t.dtype == DataType::kBytes) {
    Status s = ValidateBytesTensor(t.bytes(), elements);
    if (!s.ok()) return s.WithContext(InputContext(t.name) + ": raw_input_contents");
    return Status::Ok();
  }
  const uint64_t expected = static_cast<uint64_t>(elements) * DataTypeByteSize(t.dtype);
  if (t.size_bytes != expected) {
    return InvalidArgument(InputContext(t.name) + ": raw_input_contents holds " +
                           std::to_string(t.size_bytes) + " bytes but shape " +
                           ShapeToString(t.shape) + " of " + std::string(DataTypeName(t.dtype)) +
                           " needs " + std::to_string(expected));
  }
  return Status::Ok();
}

template <typename Map>
StatusOr<Parameters> DecodeParameters(const Map& map, std::string_view where) {
  Parameters out;
  for (const auto& [key, value] : map) {
    StatusOr<ParameterValue> v = FromInferParameter(value, key);
    if (!v.ok()) return v.status().WithContext(where);
    out.emplace(key, std::move(v).value());
  }
  return out;
}

// Output parameter `classification`: an integer >= 0 (0, as when absent: none), as over REST.
StatusOr<int64_t> ClassificationOf(const Parameters& parameters, const std::string& output) {
  auto it = parameters.find("classification");
  if (it == parameters.end()) return int64_t{0};
  const int64_t* n = std::get_if<int64_t>(&it->second);
  if (n == nullptr || *n < 0) {
    return InvalidArgument("output '" + output +
                           "': parameter 'classification' must be an integer >= 0");
  }
  return *n;
}

// Typed encoding of one output.
template <typename T, typename Repeated>
void UnpackTo(const Tensor& t, Repeated* field) {
  const size_t n = t.size_bytes / sizeof(T);
  field->Reserve(static_cast<int>(n));
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, t.data + i * sizeof(T), sizeof(T));
    field->Add(v);
  }
}

Status EncodeTyped(const Tensor& t, InferTensorContents* c) {
  switch (t.dtype) {
    case DataType::kBool:
      c->mutable_bool_contents()->Reserve(static_cast<int>(t.size_bytes));
      for (size_t i = 0; i < t.size_bytes; ++i) c->add_bool_contents(t.data[i] != std::byte{0});
      return Status::Ok();
    case DataType::kInt8: UnpackTo<int8_t>(t, c->mutable_int_contents()); return Status::Ok();
    case DataType::kInt16: UnpackTo<int16_t>(t, c->mutable_int_contents()); return Status::Ok();
    case DataType::kInt32: UnpackTo<int32_t>(t, c->mutable_int_contents()); return Status::Ok();
    case DataType::kInt64: UnpackTo<int64_t>(t, c->mutable_int64_contents()); return Status::Ok();
    case DataType::kUint8: UnpackTo<uint8_t>(t, c->mutable_uint_contents()); return Status::Ok();
    case DataType::kUint16: UnpackTo<uint16_t>(t, c->mutable_uint_contents()); return Status::Ok();
    case DataType::kUint32: UnpackTo<uint32_t>(t, c->mutable_uint_contents()); return Status::Ok();
    case DataType::kUint64:
      UnpackTo<uint64_t>(t, c->mutable_uint64_contents());
      return Status::Ok();
    case DataType::kFp32: UnpackTo<float>(t, c->mutable_fp32_contents()); return Status::Ok();
    case DataType::kFp64: UnpackTo<double>(t, c->mutable_fp64_contents()); return Status::Ok();
    case DataType::kBytes: {
      size_t at = 0;
      while (at < t.size_bytes) {
        uint32_t n = 0;
        for (int b = 3; b >= 0; --b) n = (n << 8) | static_cast<uint8_t>(t.data[at + b]);
        c->add_bytes_contents(reinterpret_cast<const char*>(t.data + at + 4), n);
        at += 4 + n;
      }
      return Status::Ok();
    }
    default: return Internal("output '" + t.name + "' has no typed form");
  }
}

// Checks an output's bytes against its shape before they are read.
Status CheckOutput(const Tensor& t) {
  const std::optional<int64_t> elements = ElementCount(t.shape);
  if (!elements) return Internal("output '" + t.name + "' has an invalid shape");
  if (t.dtype == DataType::kBytes) {
    Status s = ValidateBytesTensor(t.bytes(), *elements);
    return s.ok() ? s : Internal("output '" + t.name + "': " + s.message());
  }
  if (t.size_bytes != static_cast<uint64_t>(*elements) * DataTypeByteSize(t.dtype)) {
    return Internal("output '" + t.name + "' holds " + std::to_string(t.size_bytes) +
                    " bytes, which does not match its shape " + ShapeToString(t.shape));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ParameterValue> FromInferParameter(const inference::InferParameter& p,
                                            std::string_view name) {
  using P = inference::InferParameter;
  switch (p.parameter_choice_case()) {
    case P::kBoolParam: return ParameterValue(p.bool_param());
    case P::kInt64Param: return ParameterValue(p.int64_param());
    case P::kStringParam: return ParameterValue(p.string_param());
    case P::kDoubleParam: return ParameterValue(p.double_param());
    case P::kUint64Param:
      // Triton takes a priority as any uint64, a level past the model's meaning its default
      // one: a value past int64's range means the same as int64's largest (probe 30).
      if (name == "priority" &&
          p.uint64_param() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return ParameterValue(std::numeric_limits<int64_t>::max());
      }
      if (p.uint64_param() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return InvalidArgument("parameter '" + std::string(name) + "': uint64 value " +
                               std::to_string(p.uint64_param()) + " is over 2^63-1");
      }
      return ParameterValue(static_cast<int64_t>(p.uint64_param()));
    case P::PARAMETER_CHOICE_NOT_SET: break;
  }
  return InvalidArgument("parameter '" + std::string(name) + "' has no value");
}

void ToInferParameter(const ParameterValue& value, inference::InferParameter* out) {
  if (const bool* b = std::get_if<bool>(&value)) {
    out->set_bool_param(*b);
  } else if (const int64_t* i = std::get_if<int64_t>(&value)) {
    out->set_int64_param(*i);
  } else if (const double* d = std::get_if<double>(&value)) {
    out->set_double_param(*d);
  } else {
    out->set_string_param(std::get<std::string>(value));
  }
}

StatusOr<std::optional<int64_t>> ParseModelVersion(std::string_view s) {
  if (s.empty()) return std::optional<int64_t>();
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s[0] == '-' || s[0] == '+' || ec != std::errc() || ptr != s.data() + s.size() || v < 1) {
    // Triton's words first (its clients match them), then what a version must be.
    return InvalidArgument("failed to get model version from specified version string '" +
                           std::string(s) + "': it must be empty or a positive integer");
  }
  return std::optional<int64_t>(v);
}

StatusOr<DecodedInferRequest> DecodeModelInferRequest(ModelInferRequest* message,
                                                      const kserve::DecodeLimits& limits,
                                                      const SharedMemoryContext& shared_memory) {
  DecodedInferRequest decoded;
  auto request = std::make_unique<InferenceRequest>();
  if (message->model_name().empty()) return InvalidArgument("model_name is empty");
  request->model_name = message->model_name();
  ASSIGN_OR_RETURN(request->model_version, ParseModelVersion(message->model_version()));
  request->id = message->id();
  ASSIGN_OR_RETURN(request->parameters, DecodeParameters(message->parameters(), "request"));

  const int input_count = message->inputs_size();
  const int raw_count = message->raw_input_contents_size();
  const bool raw = raw_count > 0;
  // Inputs in shared memory have no raw_input_contents entry: the entries belong, in order, to
  // the other inputs (as Triton's clients send them).
  std::vector<std::optional<SharedMemoryRef>> in_shared_memory(static_cast<size_t>(input_count));
  int shared_memory_count = 0;
  for (int i = 0; i < input_count; ++i) {
    const ModelInferRequest::InferInputTensor& in = message->inputs(i);
    if (in.parameters().empty()) continue;
    const std::string what = InputContext(in.name());
    ASSIGN_OR_RETURN(Parameters parameters, DecodeParameters(in.parameters(), what));
    ASSIGN_OR_RETURN(in_shared_memory[static_cast<size_t>(i)], SharedMemoryRefOf(parameters, what));
    if (in_shared_memory[static_cast<size_t>(i)]) ++shared_memory_count;
  }
  // An input with typed contents in a request with raw_input_contents, in Triton's words: its
  // clients match them, and saying which input is wrong helps more than counting entries.
  for (int i = 0; raw && i < input_count; ++i) {
    const ModelInferRequest::InferInputTensor& in = message->inputs(i);
    if (!in_shared_memory[static_cast<size_t>(i)] && CountTyped(in.contents()).Total() > 0) {
      return InvalidArgument(
          "contents field must not be specified when using "
          "raw_input_contents for '" +
          in.name() + "' for model '" + message->model_name() + "'");
    }
  }
  if (raw && raw_count != input_count - shared_memory_count) {
    return InvalidArgument("raw_input_contents has " + std::to_string(raw_count) +
                           " entries but the request has " +
                           std::to_string(input_count - shared_memory_count) + " inputs" +
                           (shared_memory_count > 0 ? " not in shared memory" : "") +
                           ": it needs one per input, in input order");
  }
  // Raw, as Triton answers and its clients read, unless the request asks for typed contents.
  if (auto it = request->parameters.find(kTypedOutputsParameter); it != request->parameters.end()) {
    const bool* typed = std::get_if<bool>(&it->second);
    if (typed == nullptr) {
      return InvalidArgument(std::string("request parameter '") +
                             std::string(kTypedOutputsParameter) + "' must be a bool");
    }
    decoded.output_form = *typed ? OutputForm::kTyped : OutputForm::kRaw;
  }

  // Raw bytes move into one holder shared by the input tensors (no copy).
  std::shared_ptr<std::vector<std::string>> raw_holder;
  if (raw) {
    raw_holder = std::make_shared<std::vector<std::string>>();
    raw_holder->reserve(static_cast<size_t>(raw_count));
    for (std::string& bytes : *message->mutable_raw_input_contents())
      raw_holder->push_back(std::move(bytes));
    message->clear_raw_input_contents();
  }

  uint64_t total_bytes = 0;
  size_t next_raw = 0;
  std::set<std::string_view> names;
  request->inputs.reserve(static_cast<size_t>(input_count));
  for (int i = 0; i < input_count; ++i) {
    const ModelInferRequest::InferInputTensor& in = message->inputs(i);
    if (in.name().empty()) return InvalidArgument("input " + std::to_string(i) + " has no name");
    if (!names.insert(in.name()).second) {
      // Triton's words (its InferenceRequest::AddOriginalInput).
      return InvalidArgument("input '" + in.name() + "' already exists in request");
    }
    Tensor t;
    t.name = in.name();
    std::optional<DataType> dtype = DataTypeFromName(in.datatype());
    if (!dtype) {
      return InvalidArgument(InputContext(t.name) + ": unknown datatype '" + in.datatype() + "'");
    }
    t.dtype = *dtype;
    if (static_cast<size_t>(in.shape_size()) > limits.max_shape_dims) {
      return InvalidArgument(InputContext(t.name) + ": shape has " +
                             std::to_string(in.shape_size()) + " dimensions, more than " +
                             std::to_string(limits.max_shape_dims));
    }
    t.shape.assign(in.shape().begin(), in.shape().end());
    for (int64_t d : t.shape) {
      if (d < 0) {
        return InvalidArgument(InputContext(t.name) + ": shape " + ShapeToString(t.shape) +
                               " has a negative dimension");
      }
    }
    const std::optional<int64_t> elements = ElementCount(t.shape);
    if (!elements || *elements > limits.max_tensor_elements) {
      return PayloadTooLarge(InputContext(t.name) + ": shape " + ShapeToString(t.shape) +
                             " claims more than " + std::to_string(limits.max_tensor_elements) +
                             " elements");
    }
    const TypedCounts typed = CountTyped(in.contents());
    if (const std::optional<SharedMemoryRef>& ref = in_shared_memory[static_cast<size_t>(i)]) {
      if (typed.Total() > 0) {
        return InvalidArgument(InputContext(t.name) +
                               ": has shared memory parameters and also typed contents");
      }
      RETURN_IF_ERROR(AttachSharedMemoryInput(shared_memory, *ref, &t));
      request->inputs.push_back(std::move(t));  // not charged: the region holds the bytes
      continue;
    }
    if (raw) {
      if (typed.Total() > 0) {
        return InvalidArgument(InputContext(t.name) +
                               ": typed contents and raw_input_contents cannot be mixed");
      }
      const std::string& bytes = (*raw_holder)[next_raw++];
      t.data = reinterpret_cast<const std::byte*>(bytes.data());
      t.size_bytes = bytes.size();
      t.owner = raw_holder;
      RETURN_IF_ERROR(CheckRawSize(t, *elements));
    } else {
      const char* field = TypedFieldFor(t.dtype);
      if (field == nullptr && *elements > 0) {
        return InvalidArgument(InputContext(t.name) + ": " + std::string(in.datatype()) +
                               " has no typed contents; send it in raw_input_contents");
      }
      const int matching = CountFor(t.dtype, typed);
      if (typed.Total() != matching) {
        return InvalidArgument(InputContext(t.name) + ": datatype " + in.datatype() +
                               " takes its data in contents." + (field ? field : "(none)") +
                               "; other contents fields are set");
      }
      if (matching != *elements) {
        return InvalidArgument(InputContext(t.name) + ": contents." + (field ? field : "") +
                               " has " + std::to_string(matching) + " elements but shape " +
                               ShapeToString(t.shape) + " needs " + std::to_string(*elements));
      }
      RETURN_IF_ERROR(DecodeTyped(in.contents(), t.name, &t));
    }
    total_bytes += t.size_bytes;
    if (total_bytes > limits.max_total_input_bytes) {
      return PayloadTooLarge("the inputs hold more than " +
                             std::to_string(limits.max_total_input_bytes) + " bytes together");
    }
    request->inputs.push_back(std::move(t));
  }

  std::set<std::string_view> output_names;
  request->outputs.reserve(static_cast<size_t>(message->outputs_size()));
  for (const ModelInferRequest::InferRequestedOutputTensor& out : message->outputs()) {
    if (out.name().empty()) return InvalidArgument("a requested output has no name");
    if (!output_names.insert(out.name()).second) {
      return InvalidArgument("Duplicate output name '" + out.name() +  // Triton's words, as REST
                             "' is not allowed in a request");
    }
    RequestedOutput r;
    r.name = out.name();
    ASSIGN_OR_RETURN(r.parameters,
                     DecodeParameters(out.parameters(), "output '" + out.name() + "'"));
    ASSIGN_OR_RETURN(r.classification, ClassificationOf(r.parameters, r.name));
    r.parameters.erase("classification");  // read out, as RequestedOutput says
    // `binary_data` is the REST binary extension's; every gRPC output is bytes already.
    request->outputs.push_back(std::move(r));
  }

  // priority and timeout as the REST API reads them; gRPC has no X- headers here (the caller
  // applies grpc-timeout and the client id from metadata).
  RETURN_IF_ERROR(kserve::ApplySchedulingFields(HttpRequest{}, request.get()));
  decoded.request = std::move(request);
  return decoded;
}

Status EncodeModelInferResponse(InferenceResponse response, const InferenceRequest& selection,
                                int64_t max_batch_size, OutputForm form, ModelInferResponse* out,
                                std::span<const SharedMemoryOutput> shared_memory) {
  for (const RequestedOutput& requested : selection.outputs) {
    if (requested.classification <= 0) continue;
    for (Tensor& t : response.outputs) {
      if (t.name != requested.name) continue;
      ASSIGN_OR_RETURN(t, kserve::ClassifyOutput(t, requested.classification, max_batch_size,
                                                 requested.labels.get()));
    }
  }
  for (const Tensor& t : response.outputs) {
    RETURN_IF_ERROR(CheckOutput(t));
    // Every shared-memory output fits before any region is written.
    if (const SharedMemoryOutput* region = FindSharedMemoryOutput(shared_memory, t.name)) {
      RETURN_IF_ERROR(CheckSharedMemoryOutput(t, *region));
    } else if (TypedFieldFor(t.dtype) == nullptr) {
      form = OutputForm::kRaw;  // FP16/BF16: raw only
    }
  }
  out->set_model_name(response.model_name.empty() ? selection.model_name : response.model_name);
  out->set_model_version(std::to_string(response.model_version));
  out->set_id(response.id.empty() ? selection.id : response.id);
  for (const auto& [key, value] : response.parameters)
    ToInferParameter(value, &(*out->mutable_parameters())[key]);
  out->mutable_outputs()->Reserve(static_cast<int>(response.outputs.size()));
  for (const Tensor& t : response.outputs) {
    ModelInferResponse::InferOutputTensor* o = out->add_outputs();
    o->set_name(t.name);
    o->set_datatype(std::string(DataTypeName(t.dtype)));
    o->mutable_shape()->Add(t.shape.begin(), t.shape.end());
    if (const SharedMemoryOutput* region = FindSharedMemoryOutput(shared_memory, t.name)) {
      // In the region, not the message. Raw: an empty entry keeps raw_output_contents one per
      // output, which is how Triton answers and how its clients index them.
      WriteSharedMemoryOutput(t, *region);
      if (form == OutputForm::kRaw) out->add_raw_output_contents();
    } else if (form == OutputForm::kRaw) {
      out->add_raw_output_contents()->assign(reinterpret_cast<const char*>(t.data), t.size_bytes);
    } else {
      RETURN_IF_ERROR(EncodeTyped(t, o->mutable_contents()));
    }
  }
  return Status::Ok();
}

}  // namespace harrier::grpc_frontend
