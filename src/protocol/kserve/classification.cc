#include "protocol/kserve/classification.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "protocol/kserve/float16.h"

namespace harrier::kserve {
namespace {

// Values are ranked as long double: its 64-bit significand holds every INT64 and UINT64 value
// exactly. Ranked as double, values from 2^53 up that differ by less than a double's spacing
// tied, and the lower index won over the larger value (probe 27).
using Rank = long double;
static_assert(std::numeric_limits<Rank>::digits >= 64, "a 64-bit integer must rank exactly");

template <typename T>
Rank Load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return static_cast<Rank>(v);
}

// Element i, for ordering: exact for every type (FP16/BF16 widened exactly).
Rank ValueAt(const Tensor& t, int64_t i) {
  const std::byte* p = t.data + i * DataTypeByteSize(t.dtype);
  uint16_t h;
  switch (t.dtype) {
    case DataType::kUint8: return Load<uint8_t>(p);
    case DataType::kUint16: return Load<uint16_t>(p);
    case DataType::kUint32: return Load<uint32_t>(p);
    case DataType::kUint64: return Load<uint64_t>(p);
    case DataType::kInt8: return Load<int8_t>(p);
    case DataType::kInt16: return Load<int16_t>(p);
    case DataType::kInt32: return Load<int32_t>(p);
    case DataType::kInt64: return Load<int64_t>(p);
    case DataType::kFp32: return Load<float>(p);
    case DataType::kFp64: return Load<double>(p);
    case DataType::kFp16: std::memcpy(&h, p, 2); return Fp16BitsToFloat(h);
    case DataType::kBf16: std::memcpy(&h, p, 2); return Bf16BitsToFloat(h);
    default: return 0;
  }
}

bool IsFloating(DataType t) {
  return t == DataType::kFp16 || t == DataType::kBf16 || t == DataType::kFp32 ||
         t == DataType::kFp64;
}

// Integers print exactly: 64-bit values do not survive a trip through double, so they are
// re-read in their own type.
std::string FormatValue(const Tensor& t, int64_t i, Rank value) {
  const std::byte* p = t.data + i * DataTypeByteSize(t.dtype);
  if (IsFloating(t.dtype)) return std::to_string(static_cast<double>(value));  // "%f", as Triton
  if (t.dtype == DataType::kUint64) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return std::to_string(v);
  }
  if (t.dtype == DataType::kInt64) {
    int64_t v;
    std::memcpy(&v, p, 8);
    return std::to_string(v);
  }
  return std::to_string(static_cast<int64_t>(value));
}

}  // namespace

StatusOr<Tensor> ClassifyOutput(const Tensor& output, int64_t top_n, int64_t max_batch_size,
                                const std::vector<std::string>* labels) {
  if (output.dtype == DataType::kBool || output.dtype == DataType::kBytes ||
      output.dtype == DataType::kInvalid) {
    return InvalidArgument("output '" + output.name +
                           "': classification needs a numeric output, "
                           "not " +
                           std::string(DataTypeName(output.dtype)));
  }
  const std::optional<int64_t> n = ElementCount(output.shape);
  if (!n || output.size_bytes != static_cast<uint64_t>(*n) * DataTypeByteSize(output.dtype)) {
    return Internal("output '" + output.name + "': bytes do not match shape " +
                    ShapeToString(output.shape));
  }
  const bool batched = max_batch_size > 0 && !output.shape.empty();
  const int64_t rows = batched ? output.shape[0] : 1;
  const int64_t classes = rows == 0 ? 0 : *n / rows;
  const int64_t k = std::min(top_n, classes);

  std::vector<Rank> values(static_cast<size_t>(classes));
  std::vector<int64_t> order(static_cast<size_t>(classes));
  auto text = std::make_shared<std::string>();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = r * classes;
    for (int64_t c = 0; c < classes; ++c) values[c] = ValueAt(output, base + c);
    std::iota(order.begin(), order.end(), 0);
    // A strict weak order even with NaN: numbers before NaN, then higher first, then index.
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
      const bool a_nan = std::isnan(values[a]), b_nan = std::isnan(values[b]);
      if (a_nan != b_nan) return b_nan;
      if (!a_nan && values[a] != values[b]) return values[a] > values[b];
      return a < b;
    });
    for (int64_t j = 0; j < k; ++j) {
      const int64_t c = order[j];
      std::string entry = FormatValue(output, base + c, values[c]) + ":" + std::to_string(c);
      if (labels != nullptr && static_cast<size_t>(c) < labels->size() &&
          !(*labels)[static_cast<size_t>(c)].empty()) {
        entry += ":" + (*labels)[static_cast<size_t>(c)];
      }
      AppendBytesElement(text.get(), entry);
    }
  }

  Tensor result;
  result.name = output.name;
  result.dtype = DataType::kBytes;
  result.shape = batched ? Shape{rows, k} : Shape{k};
  result.data = reinterpret_cast<const std::byte*>(text->data());
  result.size_bytes = text->size();
  result.owner = std::move(text);
  return result;
}

}  // namespace harrier::kserve
