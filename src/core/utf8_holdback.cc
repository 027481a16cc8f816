#include "core/utf8_holdback.h"

#include "core/utf8.h"

namespace harrier {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// How a lead byte's sequence continues (RFC 3629 §4, Unicode Table 3-7): its length and the
// range its first continuation byte must fall in (later ones are always 80..BF). The narrow
// ranges after E0, ED, F0 and F4 are what exclude overlong forms, surrogates and code points
// past U+10FFFF.
struct Lead {
  int length;  // 0: the byte cannot start a sequence
  unsigned char second_min;
  unsigned char second_max;
};

Lead ClassifyLead(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};  // a continuation byte, or C0/C1 (always overlong)
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};  // F5..FF
}

enum class Ending { kHoldIncomplete, kReplaceIncomplete };

// Appends the valid text of `in` to `out`, replacing ill-formed subparts. An incomplete but so
// far valid sequence at the very end is either left out (its start is returned) or replaced.
size_t Repair(std::string_view in, Ending ending, std::string* out) {
  size_t i = 0;
  size_t run_start = 0;  // start of the current stretch of valid bytes, copied in one go
  while (i < in.size()) {
    const auto b = static_cast<unsigned char>(in[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    const Lead lead = ClassifyLead(b);
    size_t len = 1;  // bytes of the subpart examined so far
    bool ill_formed = lead.length == 0;
    while (!ill_formed && len < static_cast<size_t>(lead.length)) {
      if (i + len == in.size()) break;  // the input ends inside the sequence
      const auto c = static_cast<unsigned char>(in[i + len]);
      const unsigned char lo = len == 1 ? lead.second_min : 0x80;
      const unsigned char hi = len == 1 ? lead.second_max : 0xBF;
      if (c < lo || c > hi) {
        ill_formed = true;  // the offending byte starts the next subpart
        break;
      }
      ++len;
    }
    if (!ill_formed && len == static_cast<size_t>(lead.length)) {
      i += len;
      continue;
    }
    out->append(in.data() + run_start, i - run_start);
    if (!ill_formed && ending == Ending::kHoldIncomplete) return i;
    out->append(kReplacement);
    i += len;
    run_start = i;
  }
  out->append(in.data() + run_start, in.size() - run_start);
  return in.size();
}

}  // namespace

std::string Utf8Holdback::Push(std::string_view piece) {
  std::string out;
  if (held_.empty()) {
    // The common case: a whole-character token. Valid UTF-8 cannot end mid-sequence, so a
    // valid piece holds nothing back.
    if (IsValidUtf8(piece)) return std::string(piece);
    const size_t kept = Repair(piece, Ending::kHoldIncomplete, &out);
    held_.assign(piece.substr(kept));
    return out;
  }
  std::string joined = std::move(held_);
  joined.append(piece);
  const size_t kept = Repair(joined, Ending::kHoldIncomplete, &out);
  held_.assign(std::string_view(joined).substr(kept));
  return out;
}

std::string Utf8Holdback::Flush() {
  std::string out;
  if (!held_.empty()) Repair(held_, Ending::kReplaceIncomplete, &out);
  held_.clear();
  return out;
}

std::string ReplaceInvalidUtf8(std::string_view s) {
  if (IsValidUtf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  Repair(s, Ending::kReplaceIncomplete, &out);
  return out;
}

}  // namespace harrier
