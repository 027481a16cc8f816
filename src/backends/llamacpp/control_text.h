// Message contents are text. A chat template writes control tokens as text ("<|im_start|>",
// "</s>"), so the prompt it renders is tokenized with special tokens parsed; a message whose
// content holds such a text would be read the same way, and could end its own turn and write
// another role's. OpenAI's API treats contents as text, and so does Harrier: these pieces find a
// control token's text where a message's content landed and plan a tokenization that reads it
// there as text, and everywhere else exactly as one call with special tokens parsed would
// (docs/llamacpp-backend.md, "Message contents are text").
//
// Engine-neutral (strings in, byte ranges out): the engine supplies the vocabulary's control
// texts and runs the plan through llama.cpp's tokenizer. Immutable after construction.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harrier/generation.h"
#include "harrier/status.h"

namespace harrier {

// The texts of a vocabulary's control tokens: those its tokenizer turns into the token only
// when told to parse special tokens (llama.cpp's CONTROL and UNKNOWN tokens).
class ControlTexts {
 public:
  ControlTexts() = default;
  explicit ControlTexts(const std::vector<std::string>& texts);  // empty texts are ignored

  bool empty() const { return longest_ == 0; }

  // The first control text that starts at or after `from`: at a position, the longest one that
  // matches there. nullopt when there is none. A walk down a trie of the texts from each byte
  // that one of them starts with: at most the longest text's length in steps per such byte.
  std::optional<TextRange> Find(std::string_view text, size_t from = 0) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, uint32_t>> next;  // by byte, ascending
    bool ends = false;                                     // a text ends here
  };
  // The longest text that `text` starts with; 0 when none.
  size_t LongestAt(std::string_view text) const;

  std::vector<Node> nodes_;           // the trie; nodes_[0] is the root
  std::array<uint32_t, 256> root_{};  // the root's children by byte, dense (0: none)
  size_t longest_ = 0;
};

// A stretch of a prompt for one call of the tokenizer.
struct TokenizePiece {
  TextRange range;
  bool parse_special = true;
  bool operator==(const TokenizePiece&) const = default;
};

// How to tokenize `text` so that a control text touching a `literal` range is read as text and
// every other one as its token. One piece, {whole text, parse special}, when no control text
// touches a literal range. Otherwise each stretch between two control texts read as tokens (or
// the text's start or end) that holds one read as text is a piece of its own, not parsed, and
// the rest are parsed: the tokenizer splits its input at control tokens anyway and reads each
// stretch between them alone, so the plan changes nothing else. Ranges past the text's end are
// clipped.
std::vector<TokenizePiece> PlanTokenization(std::string_view text,
                                            const std::vector<TextRange>& literal,
                                            const ControlTexts& controls);

// What takes message i's content's place when a template renders the messages a second time to
// show where the contents land: a string no template writes and no role holds.
std::string ContentMarker(size_t i);

// Where the contents landed in `rendered`, in the order the template wrote them: `marked` is the
// same template over the same messages with content i replaced by ContentMarker(i). A template
// may trim a content's surrounding whitespace (llama.cpp's llama2-sys-strip does), drop a
// message or repeat one. kInvalidArgument when `rendered` is not `marked` with each marker
// replaced by its content, whole or trimmed.
StatusOr<std::vector<TextRange>> LocateContents(std::string_view rendered, std::string_view marked,
                                                const std::vector<std::string_view>& contents);

}  // namespace harrier
