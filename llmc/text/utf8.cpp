#include "llmc/text/utf8.h"

#include <cstring>

namespace llmc {

namespace {

// True when the 8 bytes at p are all ASCII: the common case, checked a word at a time.
bool all_ascii8(const char* p) {
  uint64_t word;
  std::memcpy(&word, p, sizeof word);
  return (word & 0x8080808080808080ull) == 0;
}

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

}  // namespace

size_t find_invalid_utf8(std::string_view text) {
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    if (i + 8 <= n && all_ascii8(text.data() + i)) {
      i += 8;
      continue;
    }
    const auto b0 = static_cast<unsigned char>(text[i]);
    if (b0 < 0x80) {
      ++i;
      continue;
    }
    // The ranges of the second byte follow the table of well-formed sequences in the Unicode
    // standard (section 3.9): they exclude overlong forms (E0 80..9F, F0 80..8F), the surrogates
    // (ED A0..BF) and code points above U+10FFFF (F4 90..BF and F5..FF).
    size_t length;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      length = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      length = 3;
      if (b0 == 0xE0) lo = 0xA0;
      if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      length = 4;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;
    } else {
      return i;  // a stray continuation byte, an overlong 2-byte lead (C0, C1) or F5..FF
    }
    if (i + 1 >= n) return i;
    const auto b1 = static_cast<unsigned char>(text[i + 1]);
    if (b1 < lo || b1 > hi) return i;
    for (size_t k = 2; k < length; ++k) {
      if (i + k >= n || !is_continuation(static_cast<unsigned char>(text[i + k]))) return i;
    }
    i += length;
  }
  return std::string_view::npos;
}

}  // namespace llmc
