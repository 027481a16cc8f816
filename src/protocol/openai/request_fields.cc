#include "protocol/openai/request_fields.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace harrier::openai {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

std::string Quoted(std::string_view param) {
  return "'" + std::string(param) + "'";
}

std::string NumberText(double d) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), d);
  return std::string(buf, r.ptr);
}

std::string NumberText(int64_t i) {
  return std::to_string(i);
}

// A number simdjson's DOM parser cannot read (an integer past 64 bits, a number past a
// double's range), which is valid JSON all the same: where it is, and its text.
struct UnreadableNumber {
  std::string path;  // as a field's param is named: "max_tokens", "messages[0].content[1].text"
  std::string text;
};

// How far below the body the search goes, in objects and arrays: as deep as a request's fields
// go (messages[i].content[j].text), and no further, so that a deeply nested body cannot make it
// recurse without bound.
constexpr int kUnreadableNumberDepth = 4;

std::optional<UnreadableNumber> FindUnreadableNumber(simdjson::ondemand::value value,
                                                     const std::string& path, int depth);

// Searches the fields of `object`, whose path is `prefix` ("" for the body, else "name.").
std::optional<UnreadableNumber> FindUnreadableNumberInObject(simdjson::ondemand::object object,
                                                             const std::string& prefix, int depth) {
  for (auto field : object) {
    std::string_view key;
    simdjson::ondemand::value value;
    if (field.unescaped_key().get(key) || field.value().get(value)) return std::nullopt;
    if (auto found = FindUnreadableNumber(value, prefix + std::string(key), depth)) return found;
  }
  return std::nullopt;
}

// Searches `value` at `path`, and the objects and arrays in it down to `depth` more levels.
// nullopt when it is not there, or the body fails otherwise first.
std::optional<UnreadableNumber> FindUnreadableNumber(simdjson::ondemand::value value,
                                                     const std::string& path, int depth) {
  simdjson::ondemand::json_type type;
  if (value.type().get(type)) return std::nullopt;
  switch (type) {
    case simdjson::ondemand::json_type::number: {
      std::string_view text = value.raw_json_token();
      while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\n' ||
                               text.back() == '\r')) {
        text.remove_suffix(1);
      }
      simdjson::ondemand::number number;
      if (value.get_number().get(number)) {
        constexpr size_t kShown = 40;
        return UnreadableNumber{path, text.size() <= kShown
                                          ? std::string(text)
                                          : std::string(text.substr(0, kShown)) + "..."};
      }
      return std::nullopt;
    }
    case simdjson::ondemand::json_type::object: {
      simdjson::ondemand::object object;
      if (depth == 0 || value.get_object().get(object)) return std::nullopt;
      return FindUnreadableNumberInObject(object, path + ".", depth - 1);
    }
    case simdjson::ondemand::json_type::array: {
      simdjson::ondemand::array array;
      if (depth == 0 || value.get_array().get(array)) return std::nullopt;
      size_t index = 0;
      for (auto element : array) {
        simdjson::ondemand::value inner;
        if (element.get(inner)) return std::nullopt;
        const std::string inner_path = path + "[" + std::to_string(index++) + "]";
        if (auto found = FindUnreadableNumber(inner, inner_path, depth - 1)) return found;
      }
      return std::nullopt;
    }
    default: return std::nullopt;
  }
}

}  // namespace

std::string_view JsonTypeName(element_type type) {
  switch (type) {
    case element_type::ARRAY: return "an array";
    case element_type::OBJECT: return "an object";
    case element_type::INT64:
    case element_type::UINT64: return "an integer";
    case element_type::DOUBLE: return "a number";
    case element_type::STRING: return "a string";
    case element_type::BOOL: return "a boolean";
    case element_type::NULL_VALUE: return "null";
  }
  return "a value";
}

Status FieldReader::Fail(std::string_view param, std::string message) {
  if (param_at_fault_ != nullptr) *param_at_fault_ = std::string(param);
  return InvalidArgument(std::move(message));
}

Status FieldReader::TooLarge(std::string_view param, std::string message) {
  if (param_at_fault_ != nullptr) *param_at_fault_ = std::string(param);
  return PayloadTooLarge(std::move(message));
}

StatusOr<simdjson::dom::object> FieldReader::ParseObject(simdjson::dom::parser& parser,
                                                         std::string_view body) {
  element root;
  const simdjson::padded_string padded(body);
  if (auto err = parser.parse(padded).get(root)) {
    if (err == simdjson::NUMBER_ERROR) {
      // Valid JSON, perhaps, with a number no field here could take: say which, by the path a
      // field's refusal would name ("parameters.seed", "stop[1]").
      simdjson::ondemand::parser on_demand;
      simdjson::ondemand::document doc;
      simdjson::ondemand::object object;
      if (!on_demand.iterate(padded).get(doc) && !doc.get_object().get(object)) {
        if (auto found = FindUnreadableNumberInObject(object, "", kUnreadableNumberDepth)) {
          return Fail(found->path, Quoted(found->path) + " is " + found->text +
                                       ", a number past what any field here takes (a 64-bit "
                                       "integer, a double)");
        }
      }
    }
    return Fail("", std::string("the body is not valid JSON: ") + simdjson::error_message(err));
  }
  simdjson::dom::object object;
  if (root.get_object().get(object)) {
    return Fail("",
                "the body must be a JSON object, got " + std::string(JsonTypeName(root.type())));
  }
  return object;
}

Status FieldReader::Integer(element value, std::string_view param, int64_t min, int64_t max,
                            int32_t* out) {
  int64_t i = 0;
  switch (value.type()) {
    case element_type::INT64: i = value.get_int64().value_unsafe(); break;
    case element_type::UINT64:  // only produced above INT64_MAX
      return Fail(param, Quoted(param) + " must be at most " + NumberText(max) + ", got " +
                             std::to_string(value.get_uint64().value_unsafe()));
    case element_type::DOUBLE: {
      const double d = value.get_double().value_unsafe();
      if (d != std::trunc(d)) {
        return Fail(param, Quoted(param) + " must be an integer, got " + NumberText(d));
      }
      if (d < static_cast<double>(min) || d > static_cast<double>(max)) {
        return Fail(param, Quoted(param) + " must be from " + NumberText(min) + " to " +
                               NumberText(max) + ", got " + NumberText(d));
      }
      i = static_cast<int64_t>(d);
      break;
    }
    default:
      return Fail(param, Quoted(param) + " must be an integer, got " +
                             std::string(JsonTypeName(value.type())));
  }
  if (i < min) {
    return Fail(param,
                Quoted(param) + " must be at least " + NumberText(min) + ", got " + NumberText(i));
  }
  if (i > max) {
    return Fail(param,
                Quoted(param) + " must be at most " + NumberText(max) + ", got " + NumberText(i));
  }
  *out = static_cast<int32_t>(i);
  return Status::Ok();
}

Status FieldReader::Number(element value, std::string_view param, double min, double max,
                           float* out) {
  double d = 0;
  if (value.get_double().get(d)) {  // simdjson converts INT64 and UINT64 too
    return Fail(
        param, Quoted(param) + " must be a number, got " + std::string(JsonTypeName(value.type())));
  }
  if (d < min || d > max) {
    return Fail(param, Quoted(param) + " must be from " + NumberText(min) + " to " +
                           NumberText(max) + ", got " + NumberText(d));
  }
  *out = static_cast<float>(d);
  return Status::Ok();
}

Status FieldReader::Bool(element value, std::string_view param, bool* out) {
  if (value.get_bool().get(*out)) {
    return Fail(param, Quoted(param) + " must be a boolean, got " +
                           std::string(JsonTypeName(value.type())));
  }
  return Status::Ok();
}

Status FieldReader::String(element value, std::string_view param, std::string* out) {
  std::string_view s;
  if (value.get_string().get(s)) {
    return Fail(
        param, Quoted(param) + " must be a string, got " + std::string(JsonTypeName(value.type())));
  }
  out->assign(s);
  return Status::Ok();
}

Status FieldReader::Object(element value, std::string_view param, simdjson::dom::object* out) {
  if (value.get_object().get(*out)) {
    return Fail(param, Quoted(param) + " must be an object, got " +
                           std::string(JsonTypeName(value.type())));
  }
  return Status::Ok();
}

Status FieldReader::Seed(element value, std::string_view param, std::optional<uint32_t>* out) {
  int64_t i = 0;
  // "An integer may be written as 16 or 16.0" (openai.md), the seed too (probe 78); a double
  // past what a seed can be is out of range below, without converting it.
  if (value.type() == element_type::DOUBLE) {
    const double d = value.get_double().value_unsafe();
    if (d != std::trunc(d))
      return Fail(param, Quoted(param) + " must be an integer, got " + NumberText(d));
    if (d < -1 || d > static_cast<double>(std::numeric_limits<uint32_t>::max())) {
      return Fail(param, Quoted(param) + " must be from 0 to 4294967294 (or -1 for a random one)" +
                             ", got " + NumberText(d));
    }
    i = static_cast<int64_t>(d);
  } else if (value.type() == element_type::UINT64) {  // only produced above INT64_MAX
    return Fail(param, Quoted(param) + " must be from 0 to 4294967294 (or -1 for a random one)" +
                           ", got " + std::to_string(value.get_uint64().value_unsafe()));
  } else if (value.get_int64().get(i)) {
    return Fail(param, Quoted(param) + " must be an integer, got " +
                           (value.type() == element_type::UINT64
                                ? std::to_string(value.get_uint64().value_unsafe())
                                : std::string(JsonTypeName(value.type()))));
  }
  // -1, and 4294967295 (llama.cpp's LLAMA_DEFAULT_SEED, which it replaces with a random one),
  // mean a random seed; llama-server reads both so.
  if (i == -1 || i == std::numeric_limits<uint32_t>::max()) {
    out->reset();
    return Status::Ok();
  }
  if (i < 0 || i > std::numeric_limits<uint32_t>::max()) {
    return Fail(param, Quoted(param) + " must be from 0 to 4294967294 (or -1 for a random one)" +
                           ", got " + std::to_string(i));
  }
  *out = static_cast<uint32_t>(i);
  return Status::Ok();
}

Status FieldReader::Stop(element value, std::string_view param, const RequestLimits& limits,
                         std::vector<std::string>* out) {
  auto one = [&](element e, const std::string& path) -> Status {
    std::string_view s;
    if (e.get_string().get(s)) {
      return Fail(path,
                  Quoted(path) + " must be a string, got " + std::string(JsonTypeName(e.type())));
    }
    if (s.empty()) return Fail(path, Quoted(path) + " must not be empty");
    if (s.size() > limits.max_stop_bytes) {
      return Fail(path, Quoted(path) + " is " + std::to_string(s.size()) +
                            " bytes long; a stop sequence may have at most " +
                            std::to_string(limits.max_stop_bytes));
    }
    out->emplace_back(s);
    return Status::Ok();
  };
  out->clear();
  if (value.type() == element_type::STRING) return one(value, std::string(param));
  simdjson::dom::array array;
  if (value.get_array().get(array)) {
    return Fail(param, Quoted(param) + " must be a string or an array of strings, got " +
                           std::string(JsonTypeName(value.type())));
  }
  if (array.size() > limits.max_stop_sequences) {
    return Fail(param, Quoted(param) + " has " + std::to_string(array.size()) +
                           " sequences; at most " + std::to_string(limits.max_stop_sequences) +
                           " are allowed");
  }
  size_t index = 0;
  for (element e : array) {
    RETURN_IF_ERROR(one(e, std::string(param) + "[" + std::to_string(index++) + "]"));
  }
  return Status::Ok();
}

}  // namespace harrier::openai
