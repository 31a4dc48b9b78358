// GPT-2's pre-tokenizer: splits text into the pieces that byte-level BPE then encodes one by one.
// It reproduces the regular expression
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// as OpenAI's encoder runs it (Python `regex`, leftmost alternative wins, greedy with
// backtracking), with a hand-written matcher over UTF-8 bytes instead of a regex engine.
// \p{L} and \p{N} are the Unicode letter and number categories (llmc/text/unicode_classes.h); \s is the
// Unicode White_Space property (see docs/tokenizer.md for where the JavaScript encoder differs).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace llmc {

enum class CharClass : uint8_t { Letter, Number, Space, Other };

CharClass classify(char32_t code_point);

// End offset of the pre-token that starts at `pos` (< text.size()). Precondition: `text` is
// valid UTF-8 (see find_invalid_utf8) and `pos` starts a code point.
size_t pretoken_end(std::string_view text, size_t pos);

// All pre-tokens of valid UTF-8 `text`, in order; they concatenate to `text`.
std::vector<std::string_view> pretokenize(std::string_view text);

}  // namespace llmc
