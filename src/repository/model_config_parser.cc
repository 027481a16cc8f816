#include "repository/model_config_parser.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "core/utf8.h"

namespace harrier {
namespace {

// Line `index` (0-based) of `text`, without its newline; empty past the end.
std::string_view Line(std::string_view text, int index) {
  for (int i = 0; i < index; ++i) {
    size_t newline = text.find('\n');
    if (newline == std::string_view::npos) return {};
    text.remove_prefix(newline + 1);
  }
  return text.substr(0, text.find('\n'));
}

// Keeps the first error the tokenizer or parser reports (later ones are usually fallout).
class FirstErrorCollector final : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (has_error_) return;
    has_error_ = true;
    line_ = line;
    column_ = column;
    message_ = message;
  }

  bool has_error() const { return has_error_; }

  // protobuf reports 0-based positions; editors and users count from 1. For an unknown field
  // protobuf points at the token after the name; point at the name itself instead.
  std::string Format(std::string_view text, const std::string& path) const {
    int column = column_;
    constexpr std::string_view kUnknown = "no field named \"";
    if (size_t at = message_.find(kUnknown); at != std::string::npos) {
      const size_t name_start = at + kUnknown.size();
      const std::string name =
          message_.substr(name_start, message_.find('"', name_start) - name_start);
      std::string_view line = Line(text, line_);
      const size_t limit = std::min(line.size(), static_cast<size_t>(std::max(column_, 0)));
      if (size_t found = line.substr(0, limit).rfind(name);
          !name.empty() && found != std::string_view::npos) {
        column = static_cast<int>(found);
      }
    }
    return path + ":" + std::to_string(line_ + 1) + ":" + std::to_string(column + 1) + ": " +
           message_;
  }

 private:
  bool has_error_ = false;
  int line_ = 0;
  int column_ = 0;
  std::string message_;
};

// The path of the first string under `m` that is not UTF-8, or empty.
std::string FirstNonUtf8(const google::protobuf::Message& m, const std::string& prefix) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* reflection = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    const std::string name = prefix.empty() ? f->name() : prefix + "." + f->name();
    const bool text = f->type() == FieldDescriptor::TYPE_STRING;
    const bool message = f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    if (!text && !message) continue;
    const int count = f->is_repeated() ? reflection->FieldSize(m, f) : 1;
    for (int i = 0; i < count; ++i) {
      std::string at = name;
      if (f->is_repeated()) at += "[" + std::to_string(i) + "]";
      if (text) {
        std::string scratch;
        const std::string& value = f->is_repeated()
                                       ? reflection->GetRepeatedStringReference(m, f, i, &scratch)
                                       : reflection->GetStringReference(m, f, &scratch);
        if (!IsValidUtf8(value)) return at;
        continue;
      }
      const google::protobuf::Message& sub =
          f->is_repeated() ? reflection->GetRepeatedMessage(m, f, i) : reflection->GetMessage(m, f);
      if (std::string found = FirstNonUtf8(sub, at); !found.empty()) return found;
    }
  }
  return {};
}

}  // namespace

Status CheckUtf8Strings(const google::protobuf::Message& config) {
  const std::string field = FirstNonUtf8(config, "");
  if (field.empty()) return Status::Ok();
  return InvalidArgument("field '" + field +
                         "' is not UTF-8 (a model config's strings go into JSON and metric "
                         "labels, which must be UTF-8)");
}

StatusOr<inference::ModelConfig> ParseModelConfig(std::string_view pbtxt,
                                                  const std::string& path_for_errors) {
  if (pbtxt.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return InvalidArgument(path_for_errors + ": config file too large");
  }
  google::protobuf::io::ArrayInputStream input(pbtxt.data(), static_cast<int>(pbtxt.size()));
  FirstErrorCollector errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.AllowUnknownField(false);
  parser.AllowUnknownExtension(false);

  inference::ModelConfig config;
  if (!parser.Parse(&input, &config)) {
    if (errors.has_error()) return InvalidArgument(errors.Format(pbtxt, path_for_errors));
    return InvalidArgument(path_for_errors + ": invalid model config");
  }
  RETURN_IF_ERROR(CheckUtf8Strings(config).WithContext(path_for_errors));
  return config;
}

std::optional<uint64_t> OversizedConfigFile(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec || size <= kMaxModelConfigBytes) return std::nullopt;
  return size;
}

StatusOr<inference::ModelConfig> ReadModelConfigFile(const std::string& path,
                                                     const FileSystem& fs) {
  if (const std::optional<uint64_t> size = OversizedConfigFile(path)) {
    return InvalidArgument(path + ": " + std::to_string(*size) + " bytes, over the " +
                           std::to_string(kMaxModelConfigBytes) + " a model config may have");
  }
  StatusOr<std::string> text = fs.ReadFile(path);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return inference::ModelConfig();
    return text.status();
  }
  return ParseModelConfig(*text, path);
}

}  // namespace harrier
