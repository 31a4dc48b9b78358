// GPT-2's pre-tokenizer against expectations worked out by hand from the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (leftmost alternative wins; `\s+(?!\S)` gives back the last whitespace character of a run that a
// non-space follows).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "llmc/text/pretokenize.h"

using llmc::CharClass;
using Pieces = std::vector<std::string>;

static Pieces split(const std::string& text) {
  Pieces out;
  for (auto piece : llmc::pretokenize(text)) out.emplace_back(piece);
  return out;
}

TEST_CASE("pretokenize: letters, numbers and symbols take one leading space") {
  CHECK(split("") == Pieces{});
  CHECK(split("Hello world") == Pieces{"Hello", " world"});
  CHECK(split(" 123abc 4") == Pieces{" 123", "abc", " 4"});
  CHECK(split("hi!!! ?.") == Pieces{"hi", "!!!", " ?."});
  CHECK(split("x+=1;") == Pieces{"x", "+=", "1", ";"});
  // The optional space is U+0020 only: a tab before a word stands alone.
  CHECK(split("a\tb") == Pieces{"a", "\t", "b"});
}

TEST_CASE("pretokenize: contractions are lower-case and only at a piece's start") {
  CHECK(split("it's we're I've you'll he'd I'm don't") ==
        Pieces{"it", "'s", " we", "'re", " I", "'ve", " you", "'ll", " he", "'d", " I", "'m", " don", "'t"});
  // Upper case is no contraction: the apostrophe is a symbol run, the letter a word.
  CHECK(split("I'M don'T") == Pieces{"I", "'", "M", " don", "'", "T"});
  CHECK(split("'s's") == Pieces{"'s", "'s"});
  // Two apostrophes form one symbol run, so the second cannot start 's.
  CHECK(split("''s") == Pieces{"''", "s"});
  CHECK(split("x'") == Pieces{"x", "'"});
  CHECK(split(" 's") == Pieces{" '", "s"});
  // A typographic apostrophe (U+2019) is a symbol like any other.
  CHECK(split("it\u2019s") == Pieces{"it", "\u2019", "s"});
}

TEST_CASE("pretokenize: whitespace runs give their last character to what follows") {
  CHECK(split("a b") == Pieces{"a", " b"});
  CHECK(split("a  b") == Pieces{"a", " ", " b"});
  CHECK(split("a   b") == Pieces{"a", "  ", " b"});
  // The character left over is a newline here, which a word does not take: it stands alone.
  CHECK(split("a\n\nb") == Pieces{"a", "\n", "\n", "b"});
  CHECK(split("a \n b") == Pieces{"a", " \n", " b"});
  CHECK(split("a\n b") == Pieces{"a", "\n", " b"});
  // At the end of the text the whole run is one piece.
  CHECK(split("a  ") == Pieces{"a", "  "});
  CHECK(split(" ") == Pieces{" "});
  CHECK(split("\n\n\n") == Pieces{"\n\n\n"});
  CHECK(split("  a") == Pieces{" ", " a"});
  // No-break space (U+00A0) is whitespace but not the optional space of a word.
  CHECK(split(" \u00a0x") == Pieces{" ", "\u00a0", "x"});
  CHECK(split("\u3000\u3000x") == Pieces{"\u3000", "\u3000", "x"});
}

TEST_CASE("pretokenize: Unicode letters, numbers and marks") {
  CHECK(split("\u4e2d\u6587 \u5b57") == Pieces{"\u4e2d\u6587", " \u5b57"});
  // A combining acute accent (U+0301, category Mn) is neither letter nor number.
  CHECK(split("e\u0301t\u00e9") == Pieces{"e", "\u0301", "t\u00e9"});
  CHECK(split("\u0967\u0968\u0969 \u00bd") == Pieces{"\u0967\u0968\u0969", " \u00bd"});
  // Emoji (4-byte UTF-8) are symbols; a ZWJ (U+200D) joins the symbol run.
  CHECK(split("a\U0001F600\u200d\U0001F600 b") == Pieces{"a", "\U0001F600\u200d\U0001F600", " b"});
  CHECK(split("\U0001D518x") == Pieces{"\U0001D518x"});  // MATHEMATICAL FRAKTUR CAPITAL U is a letter
}

TEST_CASE("pretokenize: U+0085 is whitespace and U+FEFF is not, as in GPT-2's Python regex") {
  // NEXT LINE (U+0085) ends a whitespace run exactly like a newline.
  CHECK(split("a\u0085\u0085b") == Pieces{"a", "\u0085", "\u0085", "b"});
  CHECK(split(" \u0085x") == Pieces{" ", "\u0085", "x"});
  // ZERO WIDTH NO-BREAK SPACE (U+FEFF, category Cf) is a symbol that takes a leading space.
  CHECK(split(" \ufeffx") == Pieces{" \ufeff", "x"});
  CHECK(split("\ufeff\n") == Pieces{"\ufeff", "\n"});
}

TEST_CASE("pretokenize: character classes") {
  CHECK(llmc::classify('A') == CharClass::Letter);
  CHECK(llmc::classify('7') == CharClass::Number);
  CHECK(llmc::classify('_') == CharClass::Other);
  CHECK(llmc::classify('\r') == CharClass::Space);
  CHECK(llmc::classify(0x85) == CharClass::Space);
  CHECK(llmc::classify(0x2028) == CharClass::Space);
  CHECK(llmc::classify(0x200B) == CharClass::Other);  // ZERO WIDTH SPACE is not White_Space
  CHECK(llmc::classify(0xFEFF) == CharClass::Other);
  CHECK(llmc::classify(0x4E2D) == CharClass::Letter);
  CHECK(llmc::classify(0x2167) == CharClass::Number);  // ROMAN NUMERAL EIGHT (Nl)
  CHECK(llmc::classify(0x1D518) == CharClass::Letter);
  CHECK(llmc::classify(0x1F600) == CharClass::Other);
  CHECK(llmc::classify(0x10FFFF) == CharClass::Other);
}
