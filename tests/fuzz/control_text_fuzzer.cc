// libFuzzer target: message contents read as text in a llama.cpp prompt
// (backends/llamacpp/control_text.h). An input names a vocabulary's control texts and a chat
// rendered by a template: ControlTexts finds the control texts in the rendered prompt,
// LocateContents traces the contents through the template's output marked with ContentMarker,
// PlanTokenization plans the prompt's tokenization with the contents as literal ranges.
//
// An input: CONTROLS \0 MARKUP \0 CONTENT \0 MARKUP \0 CONTENT ... \0 MARKUP
//   CONTROLS  the control texts, separated by '\n' (at most 32 of at most 32 bytes; empty ones
//             are kept, ControlTexts ignores them)
//   MARKUP    the template's own text
//   CONTENT   a flags byte, then a message's content: bit 0 the template trims it, bit 1 the
//             template writes the previous message's content again (the rest of the segment is
//             unused); other bits are ignored. After 16 contents every section is markup.
// The prompt is the markups with each content (whole or trimmed) between them; the marked
// rendering the same with ContentMarker(i) for message i's content.
//
// Findings besides the sanitizers':
// - Find not the first control text at or after `from`, or not the longest at its position
//   (a plain search over the texts is the reference).
// - LocateContents refusing a prompt that is the marked rendering with each marker replaced by
//   its content, whole or trimmed (the header's condition), when no markup holds a marker's
//   text; or accepting one with ranges that are not such a replacement.
// - A plan whose pieces do not cover the prompt in order; a control text touching a literal
//   range outside a piece read as text, or one touching none outside a parsed piece; a piece
//   read as text that does not run from one control token (or the prompt's start) to the next
//   (or its end); a plan of more than one piece where no control text touches a literal range.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/llamacpp/control_text.h"

namespace {

using harrier::ControlTexts;
using harrier::TextRange;
using harrier::TokenizePiece;

constexpr size_t kMaxControls = 32;
constexpr size_t kMaxControlBytes = 32;
constexpr size_t kMaxMessages = 16;
constexpr std::string_view kMarkerStart =
    "\x1e"
    "harrier-content-";

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "control_text_fuzzer: %s\n", what.c_str());
  std::abort();
}

std::string Show(TextRange r) {
  return "[" + std::to_string(r.begin) + ", " + std::to_string(r.end) + ")";
}

std::vector<std::string_view> Split(std::string_view s, char separator) {
  std::vector<std::string_view> parts;
  for (;;) {
    const size_t at = s.find(separator);
    parts.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return parts;
    s.remove_prefix(at + 1);
  }
}

// As control_text.cc trims: isspace in the C locale.
std::string_view Trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\v\f\r";
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

size_t Count(std::string_view s, std::string_view what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string_view::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

bool Overlaps(TextRange a, TextRange b) {
  return a.begin < b.end && b.begin < a.end;
}

bool Within(TextRange inner, TextRange outer) {
  return outer.begin <= inner.begin && inner.end <= outer.end;
}

// The reference for ControlTexts: the longest control text at each position (0: none).
std::vector<size_t> LongestAtEach(std::string_view text, const std::vector<std::string>& controls) {
  std::vector<size_t> longest(text.size(), 0);
  for (size_t i = 0; i < text.size(); ++i) {
    for (const std::string& c : controls) {
      if (!c.empty() && text.compare(i, c.size(), c) == 0) {
        longest[i] = std::max(longest[i], c.size());
      }
    }
  }
  return longest;
}

std::optional<TextRange> ReferenceFind(const std::vector<size_t>& longest, size_t from) {
  for (size_t i = from; i < longest.size(); ++i) {
    if (longest[i] > 0) return TextRange{i, i + longest[i]};
  }
  return std::nullopt;
}

// Every control text as the tokenizer finds them: each search resumes where the last one ended.
std::vector<TextRange> Occurrences(const std::vector<size_t>& longest) {
  std::vector<TextRange> found;
  for (auto r = ReferenceFind(longest, 0); r; r = ReferenceFind(longest, r->end)) {
    found.push_back(*r);
  }
  return found;
}

void CheckFind(std::string_view text, const ControlTexts& controls,
               const std::vector<size_t>& longest) {
  // Every start for a short text, some for a long one: each call may scan to the end.
  const size_t step = text.size() <= 512 ? 1 : 61;
  for (size_t from = 0; from <= text.size() + 1; from += step) {
    const auto got = controls.Find(text, from);
    const auto want = ReferenceFind(longest, from);
    if (got != want) {
      Fail("Find from " + std::to_string(from) + ": " + (got ? Show(*got) : "none") +
           ", the first longest is " + (want ? Show(*want) : "none"));
    }
  }
}

// The plan's contract, read from the header (see the file comment).
void CheckPlan(std::string_view text, const std::vector<TextRange>& literal,
               const std::vector<TextRange>& occurrences, const ControlTexts& controls) {
  const std::vector<TokenizePiece> plan = PlanTokenization(text, literal, controls);
  std::vector<TextRange> clipped;
  for (TextRange r : literal) {
    r.end = std::min(r.end, text.size());
    if (r.begin < r.end) clipped.push_back(r);
  }
  const auto touches_literal = [&](TextRange occurrence) {
    return std::any_of(clipped.begin(), clipped.end(),
                       [&](TextRange r) { return Overlaps(r, occurrence); });
  };
  const bool any_as_text = std::any_of(occurrences.begin(), occurrences.end(), touches_literal);
  const std::vector<TokenizePiece> whole = {{{0, text.size()}, true}};
  if (!any_as_text) {
    if (plan != whole) Fail("a plan of several pieces with no control text in a literal range");
    return;
  }

  size_t covered = 0;
  for (const TokenizePiece& piece : plan) {
    if (piece.range.begin != covered || piece.range.end <= piece.range.begin) {
      Fail("piece " + Show(piece.range) + " does not follow the last at " +
           std::to_string(covered) + " (or is empty)");
    }
    covered = piece.range.end;
  }
  if (covered != text.size()) Fail("the plan ends at " + std::to_string(covered));

  std::vector<TextRange> tokens;  // the control texts read as tokens
  for (TextRange occurrence : occurrences) {
    const bool as_text = touches_literal(occurrence);
    if (!as_text) tokens.push_back(occurrence);
    const auto in = std::find_if(plan.begin(), plan.end(), [&](const TokenizePiece& p) {
      return Within(occurrence, p.range);
    });
    if (in == plan.end()) Fail("control text " + Show(occurrence) + " is split by the plan");
    if (in->parse_special == as_text) {
      Fail("control text " + Show(occurrence) + (as_text ? " touches" : " touches no") +
           " literal range but its piece is " + (in->parse_special ? "parsed" : "read as text"));
    }
  }
  for (const TokenizePiece& piece : plan) {
    if (piece.parse_special) continue;
    const bool starts_after_token =
        piece.range.begin == 0 || std::any_of(tokens.begin(), tokens.end(), [&](TextRange t) {
          return t.end == piece.range.begin;
        });
    const bool ends_before_token = piece.range.end == text.size() ||
                                   std::any_of(tokens.begin(), tokens.end(), [&](TextRange t) {
                                     return t.begin == piece.range.end;
                                   });
    if (!starts_after_token || !ends_before_token) {
      Fail("piece " + Show(piece.range) + ", read as text, is not a stretch between tokens");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string_view> sections = Split(input, '\0');

  std::vector<std::string> control_list;
  for (std::string_view t : Split(sections[0], '\n')) {
    if (control_list.size() == kMaxControls) break;
    control_list.emplace_back(t.substr(0, kMaxControlBytes));
  }
  const ControlTexts controls(control_list);
  const bool none = std::all_of(control_list.begin(), control_list.end(),
                                [](const std::string& t) { return t.empty(); });
  if (controls.empty() != none) Fail("empty() is " + std::to_string(controls.empty()));

  // The chat as a template renders it, and the same with markers for the contents.
  std::vector<std::string_view> contents;
  std::string rendered;
  std::string marked;
  std::vector<TextRange> where;  // where each marker's content landed in `rendered`
  size_t markers = 0;
  for (size_t s = 1; s < sections.size(); ++s) {
    const std::string_view segment = sections[s];
    if (s % 2 == 1 || markers == kMaxMessages) {  // markup
      rendered += segment;
      marked += segment;
      continue;
    }
    const uint8_t flags = segment.empty() ? 0 : static_cast<uint8_t>(segment[0]);
    if (!(flags & 2) || contents.empty()) {
      contents.push_back(segment.empty() ? segment : segment.substr(1));
    }
    const size_t index = contents.size() - 1;
    const std::string_view content = (flags & 1) ? Trim(contents[index]) : contents[index];
    where.push_back({rendered.size(), rendered.size() + content.size()});
    rendered += content;
    marked += harrier::ContentMarker(index);
    ++markers;
  }

  const std::vector<size_t> longest = LongestAtEach(rendered, control_list);
  CheckFind(rendered, controls, longest);
  const std::vector<TextRange> occurrences = Occurrences(longest);
  CheckPlan(rendered, where, occurrences, controls);
  // Ranges past the end, and an empty one.
  std::vector<TextRange> past_end = where;
  past_end.push_back({rendered.size() / 2, rendered.size() + 7});
  past_end.push_back({rendered.size() / 3, rendered.size() / 3});
  CheckPlan(rendered, past_end, occurrences, controls);

  auto located = harrier::LocateContents(rendered, marked, contents);
  if (!located.ok()) {
    // A markup holding a marker's text is not a template's output with markers in it.
    if (Count(marked, kMarkerStart) == markers) {
      Fail("the contents of a traceable rendering were not found: " + located.status().ToString());
    }
    return 0;
  }
  // Found: `rendered` is `marked` with each marker replaced by the text of a range, in order,
  // and that text is its message's content, whole or trimmed.
  const std::vector<TextRange>& ranges = located.value();
  std::string rebuilt;
  size_t m = 0;
  size_t next_range = 0;
  for (size_t at = marked.find(kMarkerStart); at != std::string::npos;
       at = marked.find(kMarkerStart, m)) {
    const size_t end = marked.find('\x1e', at + kMarkerStart.size());
    if (end == std::string::npos) Fail("accepted a marker cut short");
    const size_t digits = at + kMarkerStart.size();
    const size_t index = std::stoul(marked.substr(digits, end - digits));
    if (next_range == ranges.size()) Fail("fewer ranges than markers");
    const TextRange r = ranges[next_range++];
    rebuilt += marked.substr(m, at - m);
    if (r.begin != rebuilt.size() || r.end < r.begin || r.end > rendered.size()) {
      Fail("range " + Show(r) + " is not where its marker's content goes");
    }
    const std::string_view text = std::string_view(rendered).substr(r.begin, r.end - r.begin);
    if (index >= contents.size() || (text != contents[index] && text != Trim(contents[index]))) {
      Fail("range " + Show(r) + " is not message " + std::to_string(index) + "'s content");
    }
    rebuilt += text;
    m = end + 1;
  }
  rebuilt += marked.substr(m);
  if (next_range != ranges.size()) Fail("more ranges than markers");
  if (rebuilt != rendered) Fail("the ranges do not rebuild the rendering");
  CheckPlan(rendered, ranges, occurrences, controls);
  return 0;
}
