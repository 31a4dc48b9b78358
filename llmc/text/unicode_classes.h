// Code point ranges of the Unicode general categories L (letters) and N (numbers), which GPT-2's
// pre-tokenizer pattern uses as \p{L} and \p{N}. The tables are generated (see
// scripts/gen_unicode_classes.js) and sorted by first code point, without overlaps.
#pragma once
#include <cstddef>
#include <cstdint>

namespace llmc {

struct CodePointRange {
  uint32_t first;
  uint32_t last;  // inclusive
};

extern const CodePointRange kLetterRanges[];
extern const size_t kLetterRangeCount;
extern const CodePointRange kNumberRanges[];
extern const size_t kNumberRangeCount;

}  // namespace llmc
