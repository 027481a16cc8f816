// Turning a tokenizer's byte pieces into valid UTF-8 text.
//
// A token is a byte string, not a character: a byte-level BPE vocabulary splits one emoji or CJK
// character over several tokens, and a model can emit bytes that never form a character at all.
// Streamed text must still be valid UTF-8 at every step (each chunk is a JSON string), so
// Utf8Holdback passes on only complete code points, keeps an unfinished sequence at the end of
// a piece until the next piece completes it, and replaces bytes that can never be valid with
// U+FFFD, one per maximal ill-formed subpart (Unicode's recommended practice, which is also
// what WHATWG decoders and Python's errors="replace" do).
//
// Users: the llama.cpp engine, for each sequence's output (through its StopMatcher), and the
// OpenAI writers, for any text that goes into JSON (ReplaceInvalidUtf8).
#pragma once

#include <string>
#include <string_view>

namespace harrier {

// Not thread-safe: one per generated sequence.
class Utf8Holdback {
 public:
  // The text that `piece`, appended to what was held back, completes: valid UTF-8, possibly
  // empty. Keeps at most 3 bytes (an incomplete, so far valid, sequence) for the next call.
  std::string Push(std::string_view piece);

  // At the end of the sequence: what is still held back, as U+FFFD (it can never complete),
  // or "" when nothing is. Leaves the holdback empty.
  std::string Flush();

  // Bytes held back now (0..3).
  size_t held_bytes() const { return held_.size(); }

 private:
  std::string held_;
};

// `s` with every ill-formed subpart replaced by U+FFFD (an incomplete sequence at the end, too).
// Returns `s` unchanged when it is valid.
std::string ReplaceInvalidUtf8(std::string_view s);

}  // namespace harrier
