#include "observability/text_exposition.h"

#include <charconv>
#include <cmath>

namespace harrier {
namespace {

std::string_view TypeName(TextExposition::Type type) {
  switch (type) {
    case TextExposition::Type::kCounter: return "counter";
    case TextExposition::Type::kGauge: return "gauge";
    case TextExposition::Type::kHistogram: return "histogram";
    case TextExposition::Type::kUntyped: return "untyped";
  }
  return "untyped";
}

void AppendEscapedHelp(std::string* out, std::string_view help) {
  for (char c : help) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else {
      out->push_back(c);
    }
  }
}

std::string FormatUint(uint64_t value) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  (void)ec;
  return std::string(buf, end);
}

}  // namespace

void AppendEscapedLabelValue(std::string* out, std::string_view value) {
  for (char c : value) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '"') {
      out->append("\\\"");
    } else if (c == '\n') {
      out->append("\\n");
    } else {
      out->push_back(c);
    }
  }
}

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  // The shortest representation that reads back to the same double, in fixed notation where
  // that stays short (le="0.00005" rather than le="5e-05": easier to read in a query).
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  (void)ec;
  std::string general(buf, end);
  if (general.find('e') == std::string::npos) return general;
  auto [fixed_end, fixed_ec] =
      std::to_chars(buf, buf + sizeof buf, value, std::chars_format::fixed);
  if (fixed_ec == std::errc() && fixed_end - buf <= 24) return std::string(buf, fixed_end);
  return general;
}

TextExposition::Family& TextExposition::Find(std::string_view name) {
  auto it = index_.find(name);
  if (it != index_.end()) return families_[it->second];
  index_.emplace(std::string(name), families_.size());
  Family& f = families_.emplace_back();
  f.name = std::string(name);
  return f;
}

void TextExposition::Declare(std::string_view name, Type type, std::string_view help) {
  const bool known = index_.find(name) != index_.end();
  Family& f = Find(name);
  if (known) return;
  f.type = type;
  f.help = std::string(help);
}

void TextExposition::AppendLine(std::string* out, std::string_view name, const Labels& labels,
                                std::string_view extra_name, std::string_view extra_value,
                                std::string_view value) {
  out->append(name);
  if (!labels.empty() || !extra_name.empty()) {
    out->push_back('{');
    bool first = true;
    auto label = [&](std::string_view k, std::string_view v) {
      if (!first) out->push_back(',');
      first = false;
      out->append(k);
      out->append("=\"");
      AppendEscapedLabelValue(out, v);
      out->push_back('"');
    };
    for (const auto& [k, v] : labels) label(k, v);
    if (!extra_name.empty()) label(extra_name, extra_value);
    out->push_back('}');
  }
  out->push_back(' ');
  out->append(value);
  out->push_back('\n');
}

void TextExposition::Add(std::string_view family, const Labels& labels, double value) {
  Family& f = Find(family);
  AppendLine(&f.samples, family, labels, {}, {}, FormatSampleValue(value));
}

void TextExposition::Add(std::string_view family, const Labels& labels, uint64_t value) {
  Family& f = Find(family);
  AppendLine(&f.samples, family, labels, {}, {}, FormatUint(value));
}

void TextExposition::AddHistogram(std::string_view family, const Labels& labels,
                                  std::span<const uint64_t> upper_bounds,
                                  const HistogramSnapshot& snapshot, double unit_divisor) {
  Family& f = Find(family);
  const std::string bucket = std::string(family) + "_bucket";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < snapshot.bucket_counts.size(); ++i) {
    cumulative += snapshot.bucket_counts[i];
    const std::string le =
        i < upper_bounds.size()
            ? FormatSampleValue(static_cast<double>(upper_bounds[i]) / unit_divisor)
            : std::string("+Inf");
    AppendLine(&f.samples, bucket, labels, "le", le, FormatUint(cumulative));
  }
  AppendLine(&f.samples, std::string(family) + "_sum", labels, {}, {},
             FormatSampleValue(static_cast<double>(snapshot.sum) / unit_divisor));
  AppendLine(&f.samples, std::string(family) + "_count", labels, {}, {}, FormatUint(cumulative));
}

std::string TextExposition::Text() const {
  std::string out;
  for (const Family& f : families_) {
    if (f.samples.empty()) continue;
    if (!f.help.empty()) {
      out.append("# HELP ").append(f.name).push_back(' ');
      AppendEscapedHelp(&out, f.help);
      out.push_back('\n');
    }
    out.append("# TYPE ").append(f.name).push_back(' ');
    out.append(TypeName(f.type)).push_back('\n');
    out.append(f.samples);
  }
  return out;
}

}  // namespace harrier
