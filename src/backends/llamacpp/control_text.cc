#include "backends/llamacpp/control_text.h"

#include <algorithm>
#include <set>

namespace harrier {
namespace {

constexpr std::string_view kMarkerStart =
    "\x1e"
    "harrier-content-";
constexpr char kMarkerEnd = '\x1e';

std::string_view Trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\v\f\r";  // isspace in the C locale, as llama.cpp's
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

bool Overlaps(TextRange a, TextRange b) {
  return a.begin < b.end && b.begin < a.end;
}

// Whether `occurrence` overlaps one of `sorted`: by begin, with ends made non-decreasing (each
// range widened to its predecessors' end, which keeps their union).
bool TouchesAny(TextRange occurrence, const std::vector<TextRange>& sorted) {
  auto it = std::partition_point(sorted.begin(), sorted.end(),
                                 [&](const TextRange& r) { return r.end <= occurrence.begin; });
  return it != sorted.end() && Overlaps(*it, occurrence);
}

}  // namespace

ControlTexts::ControlTexts(const std::vector<std::string>& texts) : nodes_(1) {
  for (const std::string& t : texts) {
    if (t.empty()) continue;
    longest_ = std::max(longest_, t.size());
    uint32_t node = 0;
    for (size_t k = 0; k < t.size(); ++k) {
      const auto byte = static_cast<unsigned char>(t[k]);
      uint32_t child = 0;
      if (k == 0) {
        child = root_[byte];
      } else {
        const auto& next = nodes_[node].next;
        const auto it = std::lower_bound(next.begin(), next.end(), std::pair(byte, 0u));
        if (it != next.end() && it->first == byte) child = it->second;
      }
      if (child == 0) {
        child = static_cast<uint32_t>(nodes_.size());
        nodes_.emplace_back();
        if (k == 0) {
          root_[byte] = child;
        } else {
          auto& next = nodes_[node].next;
          next.insert(std::lower_bound(next.begin(), next.end(), std::pair(byte, 0u)),
                      {byte, child});
        }
      }
      node = child;
    }
    nodes_[node].ends = true;
  }
}

std::optional<TextRange> ControlTexts::Find(std::string_view text, size_t from) const {
  for (size_t i = from; i < text.size(); ++i) {
    if (root_[static_cast<unsigned char>(text[i])] == 0) continue;
    if (const size_t n = LongestAt(text.substr(i)); n > 0) return TextRange{i, i + n};
  }
  return std::nullopt;
}

size_t ControlTexts::LongestAt(std::string_view text) const {
  uint32_t node = root_[static_cast<unsigned char>(text[0])];
  size_t longest = nodes_[node].ends ? 1 : 0;
  for (size_t k = 1; k < text.size(); ++k) {
    const auto byte = static_cast<unsigned char>(text[k]);
    const auto& next = nodes_[node].next;
    const auto it = std::lower_bound(next.begin(), next.end(), std::pair(byte, 0u));
    if (it == next.end() || it->first != byte) break;
    node = it->second;
    if (nodes_[node].ends) longest = k + 1;
  }
  return longest;
}

std::vector<TokenizePiece> PlanTokenization(std::string_view text,
                                            const std::vector<TextRange>& literal,
                                            const ControlTexts& controls) {
  const std::vector<TokenizePiece> whole = {{{0, text.size()}, true}};
  std::vector<TextRange> ranges;
  for (TextRange r : literal) {
    r.end = std::min(r.end, text.size());
    if (r.begin < r.end) ranges.push_back(r);
  }
  if (ranges.empty() || controls.empty()) return whole;
  std::sort(ranges.begin(), ranges.end(),
            [](const TextRange& a, const TextRange& b) { return a.begin < b.begin; });
  // The ranges' ends, made non-decreasing, for TouchesAny's search.
  for (size_t i = 1; i < ranges.size(); ++i) {
    ranges[i].end = std::max(ranges[i].end, ranges[i - 1].end);
  }

  // Every control text, as the tokenizer would find it; those touching a literal range are text.
  std::vector<TextRange> tokens;  // read as control tokens
  std::vector<TextRange> texts;   // read as text
  for (std::optional<TextRange> found = controls.Find(text); found;
       found = controls.Find(text, found->end)) {
    (TouchesAny(*found, ranges) ? texts : tokens).push_back(*found);
  }
  if (texts.empty()) return whole;

  // Each text widens to the stretch between the control tokens around it.
  std::vector<TokenizePiece> plan;
  size_t done = 0;  // the end of what the plan covers
  size_t next_token = 0;
  for (const TextRange& t : texts) {
    if (t.begin < done) continue;  // in the stretch already planned
    while (next_token < tokens.size() && tokens[next_token].end <= t.begin) ++next_token;
    const size_t stretch_begin = next_token == 0 ? 0 : tokens[next_token - 1].end;
    const size_t stretch_end = next_token < tokens.size() ? tokens[next_token].begin : text.size();
    if (done < stretch_begin) plan.push_back({{done, stretch_begin}, true});
    plan.push_back({{std::max(done, stretch_begin), stretch_end}, false});
    done = stretch_end;
  }
  if (done < text.size()) plan.push_back({{done, text.size()}, true});
  return plan;
}

std::string ContentMarker(size_t i) {
  return std::string(kMarkerStart) + std::to_string(i) + kMarkerEnd;
}

StatusOr<std::vector<TextRange>> LocateContents(std::string_view rendered, std::string_view marked,
                                                const std::vector<std::string_view>& contents) {
  const auto mismatch = [] {
    return InvalidArgument(
        "the model's chat template changes a message's content in a way that cannot be traced "
        "in its output, so a control token's text in it cannot be kept as text");
  };
  // The template's own text from `at_m` to the next marker (or the end) must come next in
  // `rendered`, at `at_r`; returns where that marker starts (npos: none).
  const auto markup_matches = [&](size_t at_m, size_t at_r, size_t* marker) {
    *marker = marked.find(kMarkerStart, at_m);
    const size_t len = (*marker == std::string_view::npos ? marked.size() : *marker) - at_m;
    return at_r <= rendered.size() && rendered.compare(at_r, len, marked.substr(at_m, len)) == 0;
  };
  // The length of the markup from `at_m` to `marker` (npos: to the end).
  const auto markup_size = [&](size_t at_m, size_t marker) {
    return (marker == std::string_view::npos ? marked.size() : marker) - at_m;
  };
  // The marker at `at`: the message it names, and where the markup after it starts.
  struct Marker {
    size_t index = 0;
    size_t after = 0;
  };
  const auto read_marker = [&](size_t at) -> std::optional<Marker> {
    const size_t digits = at + kMarkerStart.size();
    const size_t end = marked.find(kMarkerEnd, digits);
    if (end == std::string_view::npos || end == digits || end - digits > 9) return std::nullopt;
    size_t index = 0;
    for (size_t i = digits; i < end; ++i) {
      if (marked[i] < '0' || marked[i] > '9') return std::nullopt;
      index = index * 10 + static_cast<size_t>(marked[i] - '0');
    }
    if (index >= contents.size()) return std::nullopt;
    return Marker{index, end + 1};
  };

  size_t first = 0;
  if (!markup_matches(0, 0, &first)) return mismatch();
  if (first == std::string_view::npos) {
    if (marked.size() != rendered.size()) return mismatch();
    return std::vector<TextRange>{};
  }

  // Each content is there whole or trimmed, and which may show only further on: after "x " and
  // the markup " ", "x  y" is "x " whole when the next content is "y" and "x" trimmed when it is
  // " y". A depth-first search over the choices, whole first. A (marker, position) that led
  // nowhere leads nowhere whichever way it was reached, so each is tried once: a chat of many
  // blank contents takes time in proportion to markers times positions, not 2^markers.
  struct Step {
    size_t marker;  // where it starts in `marked`
    size_t r;       // where its content starts in `rendered`
    Marker read;
    int tried = 0;  // 0: nothing yet, 1: whole, 2: trimmed too
  };
  std::vector<Step> path;
  std::vector<TextRange> ranges;  // the choices of path's steps but the last
  std::set<std::pair<size_t, size_t>> dead_ends;
  const std::optional<Marker> read = read_marker(first);
  if (!read) return mismatch();
  path.push_back({first, first, *read});
  while (!path.empty()) {
    Step& step = path.back();
    if (step.tried == 2) {
      dead_ends.insert({step.marker, step.r});
      path.pop_back();
      if (!ranges.empty()) ranges.pop_back();
      continue;
    }
    const std::string_view whole = contents[step.read.index];
    const std::string_view content = step.tried++ == 0 ? whole : Trim(whole);
    if (step.tried == 2 && content.size() == whole.size()) continue;  // nothing to trim
    if (rendered.compare(step.r, content.size(), content) != 0) continue;
    const size_t content_end = step.r + content.size();
    size_t next = 0;
    if (!markup_matches(step.read.after, content_end, &next)) continue;
    const size_t next_r = content_end + markup_size(step.read.after, next);
    if (next == std::string_view::npos) {
      if (next_r != rendered.size()) continue;
      ranges.push_back({step.r, content_end});
      return ranges;
    }
    if (dead_ends.contains({next, next_r})) continue;
    const std::optional<Marker> next_read = read_marker(next);
    if (!next_read) return mismatch();  // the same marker, whichever way it is reached
    ranges.push_back({step.r, content_end});
    path.push_back({next, next_r, *next_read});  // `step` is not used after this
  }
  return mismatch();
}

}  // namespace harrier
