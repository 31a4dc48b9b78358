#include "llmc/text/pretokenize.h"

#include <algorithm>
#include <array>

#include "llmc/text/unicode_classes.h"
#include "llmc/text/utf8.h"

namespace llmc {

namespace {

bool in_ranges(char32_t cp, const CodePointRange* ranges, size_t count) {
  const CodePointRange* end = ranges + count;
  // The first range whose last code point is >= cp is the only one that can hold cp.
  const CodePointRange* r =
      std::lower_bound(ranges, end, cp, [](const CodePointRange& range, char32_t c) { return range.last < c; });
  return r != end && r->first <= cp;
}

// Unicode White_Space, the set Python's `regex` module (which GPT-2 used) means by \s.
bool is_white_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

CharClass classify_slow(char32_t cp) {
  if (is_white_space(cp)) return CharClass::Space;
  if (in_ranges(cp, kLetterRanges, kLetterRangeCount)) return CharClass::Letter;
  if (in_ranges(cp, kNumberRanges, kNumberRangeCount)) return CharClass::Number;
  return CharClass::Other;
}

// The class of every code point of the Basic Multilingual Plane, built once: almost all text
// stays in it, and a table lookup is much cheaper than two binary searches.
const std::array<CharClass, 0x10000>& bmp_classes() {
  static const std::array<CharClass, 0x10000> table = [] {
    std::array<CharClass, 0x10000> t{};
    for (char32_t cp = 0; cp < 0x10000; ++cp) t[cp] = classify_slow(cp);
    return t;
  }();
  return table;
}

// The class of the code point at text[pos]; `length` gets its length in bytes.
inline CharClass class_at(std::string_view text, size_t pos, size_t& length, const CharClass* bmp) {
  const auto b0 = static_cast<unsigned char>(text[pos]);
  if (b0 < 0x80) {
    length = 1;
    return bmp[b0];
  }
  const char32_t cp = decode_utf8(text, pos, length);
  return cp < 0x10000 ? bmp[cp] : classify_slow(cp);
}

// Length of the contraction ('s 't 're 've 'm 'll 'd, lower case only) at text[pos], or 0.
size_t contraction_length(std::string_view text, size_t pos) {
  const size_t left = text.size() - pos;
  if (left < 2 || text[pos] != '\'') return 0;
  const char c1 = text[pos + 1];
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (left < 3) return 0;
  const char c2 = text[pos + 2];
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

}  // namespace

CharClass classify(char32_t code_point) {
  return code_point < 0x10000 ? bmp_classes()[code_point] : classify_slow(code_point);
}

size_t pretoken_end(std::string_view text, size_t pos) {
  const CharClass* bmp = bmp_classes().data();
  const size_t n = text.size();
  if (const size_t c = contraction_length(text, pos)) return pos + c;

  size_t length;
  CharClass cls = class_at(text, pos, length, bmp);
  size_t run_start = pos;
  // ` ?\p{L}+`, ` ?\p{N}+` and ` ?[^\s\p{L}\p{N}]+`: a single leading space (U+0020 only) joins
  // the run of letters, digits or other symbols right after it.
  if (text[pos] == ' ' && pos + 1 < n) {
    size_t next_length;
    const CharClass next = class_at(text, pos + 1, next_length, bmp);
    if (next != CharClass::Space) {
      cls = next;
      run_start = pos + 1;
      length = next_length;
    }
  }
  if (cls != CharClass::Space) {
    size_t end = run_start + length;
    while (end < n && class_at(text, end, length, bmp) == cls) end += length;
    return end;
  }

  // `\s+(?!\S)` backtracks from the longest whitespace run until the next character is not a
  // non-space: at the end of the text that is the whole run; before a non-space it is the run
  // minus its last character, which then starts the next pre-token (so " word" keeps its space).
  // A run of one character before a non-space leaves `\s+(?!\S)` nothing, and `\s+` takes it.
  size_t last_start = pos;
  size_t end = pos + length;
  while (end < n && class_at(text, end, length, bmp) == CharClass::Space) {
    last_start = end;
    end += length;
  }
  if (end == n || last_start == pos) return end;
  return last_start;
}

std::vector<std::string_view> pretokenize(std::string_view text) {
  std::vector<std::string_view> pieces;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = pretoken_end(text, pos);
    pieces.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return pieces;
}

}  // namespace llmc
