// TextExposition: builds a Prometheus text exposition (format 0.0.4, what prometheus-cpp's
// TextSerializer writes and `promtool check metrics` reads) from samples added in any order.
//
// Families are written in the order they were declared, each with its HELP and TYPE lines and
// then all of its samples together, as the format requires, whatever order the collectors
// added them in (a collector typically walks models in the outer loop and families in the
// inner one). Label values are escaped (backslash, double quote, newline); HELP text too.
//
// Not thread-safe: one exposition is built by one scrape.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "observability/histogram.h"

namespace harrier {

class TextExposition {
 public:
  enum class Type { kCounter, kGauge, kHistogram, kUntyped };
  // Label name and value; names must be valid Prometheus label names (they are not checked),
  // values may be anything.
  using Labels = std::vector<std::pair<std::string_view, std::string_view>>;

  // Declares a family. Declaring one again keeps the first declaration.
  void Declare(std::string_view name, Type type, std::string_view help);

  // One sample of a counter, gauge or untyped family (declared first; an undeclared family is
  // declared untyped with no help).
  void Add(std::string_view family, const Labels& labels, double value);
  void Add(std::string_view family, const Labels& labels, uint64_t value);

  // One histogram: `name_bucket{...,le="..."}` cumulative lines ending with le="+Inf", then
  // `name_sum` and `name_count`. Bounds and the sum are divided by `unit_divisor` (1e9 turns
  // nanoseconds into seconds; dividing by a power of ten keeps 125000 ns a plain "0.000125").
  void AddHistogram(std::string_view family, const Labels& labels,
                    std::span<const uint64_t> upper_bounds, const HistogramSnapshot& snapshot,
                    double unit_divisor);

  // The exposition text: families in declaration order (HELP when there is help text, TYPE,
  // samples). A declared family with no samples is left out.
  std::string Text() const;

  // Content-Type of the text format.
  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  struct Family {
    std::string name;
    Type type = Type::kUntyped;
    std::string help;
    std::string samples;  // finished lines
  };
  Family& Find(std::string_view name);
  // Appends `name{labels[,extra]} value\n` to `family`.
  static void AppendLine(std::string* out, std::string_view name, const Labels& labels,
                         std::string_view extra_name, std::string_view extra_value,
                         std::string_view value);

  std::vector<Family> families_;
  std::map<std::string, size_t, std::less<>> index_;
};

// A label value with \, " and newline escaped, appended to `out`.
void AppendEscapedLabelValue(std::string* out, std::string_view value);
// A sample value as the text format writes it: integers without a fraction, others in the
// shortest form that reads back to the same double; "+Inf", "-Inf", "NaN".
std::string FormatSampleValue(double value);

}  // namespace harrier
