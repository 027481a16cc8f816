#include "repository/config_json.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <vector>

#include "core/json_writer.h"
#include "repository/model_config_parser.h"

namespace harrier {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

template <typename T>
void AppendNumber(T value, std::string* out) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  out->append(buf, end);
}

template <typename T>
void AppendFloating(T value, std::string* out) {
  // JSON has no NaN or infinities; the protobuf JSON mapping writes them as strings.
  if (std::isnan(value)) {
    *out += "\"NaN\"";
  } else if (std::isinf(value)) {
    *out += value > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  } else {
    AppendNumber(value, out);
  }
}

void AppendBase64(std::string_view bytes, std::string* out) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  out->push_back('"');
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t n = (uint32_t{static_cast<unsigned char>(bytes[i])} << 16) |
                 (uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8) |
                 uint32_t{static_cast<unsigned char>(bytes[i + 2])};
    for (int shift = 18; shift >= 0; shift -= 6) out->push_back(kAlphabet[(n >> shift) & 63]);
  }
  if (i < bytes.size()) {
    uint32_t n = uint32_t{static_cast<unsigned char>(bytes[i])} << 16;
    if (i + 1 < bytes.size()) n |= uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8;
    out->push_back(kAlphabet[(n >> 18) & 63]);
    out->push_back(kAlphabet[(n >> 12) & 63]);
    out->push_back(i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=');
    out->push_back('=');
  }
  out->push_back('"');
}

void AppendMessage(const Message& message, std::string* out);

// One value of `field`: element `index` of a repeated field, or the singular value when
// index < 0.
void AppendValue(const Message& message, const FieldDescriptor* field, int index,
                 std::string* out) {
  const Reflection* r = message.GetReflection();
  const bool rep = index >= 0;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      AppendNumber(rep ? r->GetRepeatedInt32(message, field, index) : r->GetInt32(message, field),
                   out);
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      AppendNumber(rep ? r->GetRepeatedInt64(message, field, index) : r->GetInt64(message, field),
                   out);
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      AppendNumber(rep ? r->GetRepeatedUInt32(message, field, index) : r->GetUInt32(message, field),
                   out);
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      AppendNumber(rep ? r->GetRepeatedUInt64(message, field, index) : r->GetUInt64(message, field),
                   out);
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      AppendFloating(
          rep ? r->GetRepeatedDouble(message, field, index) : r->GetDouble(message, field), out);
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      AppendFloating(rep ? r->GetRepeatedFloat(message, field, index) : r->GetFloat(message, field),
                     out);
      break;
    case FieldDescriptor::CPPTYPE_BOOL: {
      bool v = rep ? r->GetRepeatedBool(message, field, index) : r->GetBool(message, field);
      *out += v ? "true" : "false";
      break;
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      int number =
          rep ? r->GetRepeatedEnumValue(message, field, index) : r->GetEnumValue(message, field);
      const auto* value = field->enum_type()->FindValueByNumber(number);
      if (value != nullptr) {
        AppendJsonString(out, value->name());
      } else {
        AppendNumber(number, out);  // an unknown value read from the wire
      }
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string scratch;
      const std::string& v = rep ? r->GetRepeatedStringReference(message, field, index, &scratch)
                                 : r->GetStringReference(message, field, &scratch);
      if (field->type() == FieldDescriptor::TYPE_BYTES) {
        AppendBase64(v, out);
      } else {
        AppendJsonString(out, v);
      }
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      AppendMessage(
          rep ? r->GetRepeatedMessage(message, field, index) : r->GetMessage(message, field), out);
      break;
  }
}

// A map key as JSON object keys are: always a string.
std::string MapKeyString(const Message& entry, const FieldDescriptor* key_field) {
  std::string key;
  AppendValue(entry, key_field, -1, &key);
  if (key.size() >= 2 && key.front() == '"') return key;  // string keys are already quoted
  return "\"" + key + "\"";
}

void AppendMap(const Message& message, const FieldDescriptor* field, std::string* out) {
  const Reflection* r = message.GetReflection();
  const FieldDescriptor* key_field = field->message_type()->map_key();
  const FieldDescriptor* value_field = field->message_type()->map_value();
  const bool numeric_keys = key_field->cpp_type() != FieldDescriptor::CPPTYPE_STRING &&
                            key_field->cpp_type() != FieldDescriptor::CPPTYPE_BOOL;

  struct Entry {
    std::string key;  // quoted
    const Message* message;
  };
  std::vector<Entry> entries;
  const int size = r->FieldSize(message, field);
  entries.reserve(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) {
    const Message& entry = r->GetRepeatedMessage(message, field, i);
    entries.push_back({MapKeyString(entry, key_field), &entry});
  }
  std::sort(entries.begin(), entries.end(), [numeric_keys](const Entry& a, const Entry& b) {
    // Same-sign decimal integers order by length first, then lexicographically; negative
    // keys (int32/int64 maps only) go before non-negative ones, larger magnitude first.
    if (numeric_keys) {
      const bool a_neg = a.key[1] == '-';
      const bool b_neg = b.key[1] == '-';
      if (a_neg != b_neg) return a_neg;
      if (a.key.size() != b.key.size()) return (a.key.size() < b.key.size()) != a_neg;
      return a_neg ? a.key > b.key : a.key < b.key;
    }
    return a.key < b.key;
  });

  out->push_back('{');
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out->push_back(',');
    *out += entries[i].key;
    out->push_back(':');
    AppendValue(*entries[i].message, value_field, -1, out);
  }
  out->push_back('}');
}

void AppendMessage(const Message& message, std::string* out) {
  const google::protobuf::Descriptor* descriptor = message.GetDescriptor();
  const Reflection* r = message.GetReflection();
  out->push_back('{');
  bool first = true;
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    // Left out when unset: message fields and members of a real oneof. Scalars (proto3
    // optional ones included) print their default, as Triton prints them.
    if (!field->is_repeated()) {
      const bool in_real_oneof = field->real_containing_oneof() != nullptr;
      const bool is_message = field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
      if ((in_real_oneof || is_message) && !r->HasField(message, field)) continue;
    }
    if (!first) out->push_back(',');
    first = false;
    AppendJsonString(out, field->name());
    out->push_back(':');
    if (field->is_map()) {
      AppendMap(message, field, out);
    } else if (field->is_repeated()) {
      out->push_back('[');
      const int size = r->FieldSize(message, field);
      for (int j = 0; j < size; ++j) {
        if (j > 0) out->push_back(',');
        AppendValue(message, field, j, out);
      }
      out->push_back(']');
    } else {
      AppendValue(message, field, -1, out);
    }
  }
  out->push_back('}');
}

}  // namespace

std::string ModelConfigToJson(const inference::ModelConfig& config) {
  std::string out;
  out.reserve(512);
  AppendMessage(config, &out);
  return out;
}

StatusOr<inference::ModelConfig> ParseModelConfigJson(const std::string& json) {
  if (json.size() > kMaxModelConfigBytes) {
    return InvalidArgument("the model config is " + std::to_string(json.size()) +
                           " bytes, over the " + std::to_string(kMaxModelConfigBytes) +
                           " a model config may have");
  }
  inference::ModelConfig config;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &config);
  if (!status.ok())
    return InvalidArgument("the model config is not valid JSON for a ModelConfig: " +
                           std::string(status.message()));
  RETURN_IF_ERROR(CheckUtf8Strings(config));
  return config;
}

}  // namespace harrier
