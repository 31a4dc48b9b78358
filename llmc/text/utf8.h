// UTF-8 validation and decoding, as the tokenizer needs them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace llmc {

// Offset of the first byte that is not part of valid UTF-8 (overlongs, surrogates, > U+10FFFF and
// truncated sequences are invalid), or std::string_view::npos if all of `text` is valid.
size_t find_invalid_utf8(std::string_view text);

// Decodes the code point that starts at text[pos] and stores its length in bytes in `length`.
// Precondition: `text` is valid UTF-8 and pos is the start of a code point.
inline char32_t decode_utf8(std::string_view text, size_t pos, size_t& length) {
  const auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(text[pos + i])); };
  const uint32_t b0 = byte(0);
  if (b0 < 0x80) {
    length = 1;
    return b0;
  }
  if (b0 < 0xE0) {
    length = 2;
    return ((b0 & 0x1F) << 6) | (byte(1) & 0x3F);
  }
  if (b0 < 0xF0) {
    length = 3;
    return ((b0 & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
  }
  length = 4;
  return ((b0 & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
}

}  // namespace llmc
