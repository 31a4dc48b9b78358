// UTF-8 validation and the GPT-2 tokenizer: vocabulary loading and its errors, BPE merge order,
// GPT-2's behaviour where the JavaScript encoder differs, round trips and concurrent use.
// Token ids in expectations were looked up by hand in data/encoder.json (and merges in
// data/vocab.bpe); the corpus-wide comparison with the JavaScript encoder is
// tests/text/check_tokenizer_parity.sh.
#include <doctest/doctest.h>

#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "llmc/text/tokenizer.h"
#include "llmc/text/utf8.h"
#include "tests/unit/test_support.h"

using llmc::Tokenizer;
using test_support::TempDir;
using Ids = std::vector<int>;

namespace {

const Tokenizer& gpt2() {
  static const Tokenizer tokenizer(llmc::default_encoder_path(), llmc::default_vocab_bpe_path());
  return tokenizer;
}

// The message of the error f() throws, or "" if none: any std::exception, since the tokenizer
// throws std::out_of_range and std::invalid_argument as well as std::runtime_error.
template <typename F>
std::string error_of(F&& f) {
  return test_support::error_message<std::exception>(f);
}

}  // namespace

TEST_CASE("utf8: valid text") {
  using llmc::find_invalid_utf8;
  const size_t npos = std::string_view::npos;
  CHECK(find_invalid_utf8("") == npos);
  CHECK(find_invalid_utf8("plain ASCII text, longer than eight bytes") == npos);
  CHECK(find_invalid_utf8("\xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x80") == npos);  // é 中 😀
  CHECK(find_invalid_utf8("\xED\x9F\xBF") == npos);                            // U+D7FF, just below the surrogates
  CHECK(find_invalid_utf8("\xEE\x80\x80") == npos);                            // U+E000, just above them
  CHECK(find_invalid_utf8("\xF4\x8F\xBF\xBF") == npos);                        // U+10FFFF, the last code point
  CHECK(find_invalid_utf8(std::string_view("a\0b", 3)) == npos);               // NUL is a character
}

TEST_CASE("utf8: invalid sequences report the offset of their first byte") {
  using llmc::find_invalid_utf8;
  CHECK(find_invalid_utf8("\x80") == 0);                      // stray continuation byte
  CHECK(find_invalid_utf8("ab\xC0\x80") == 2);                // overlong NUL
  CHECK(find_invalid_utf8("\xC1\xBF") == 0);                  // overlong U+007F
  CHECK(find_invalid_utf8("x\xE0\x80\xAF") == 1);             // overlong '/'
  CHECK(find_invalid_utf8("\xF0\x8F\xBF\xBF") == 0);          // overlong U+FFFF
  CHECK(find_invalid_utf8("ok\xED\xA0\x80") == 2);            // surrogate U+D800
  CHECK(find_invalid_utf8("\xED\xBF\xBF") == 0);              // surrogate U+DFFF
  CHECK(find_invalid_utf8("\xF4\x90\x80\x80") == 0);          // U+110000
  CHECK(find_invalid_utf8("\xF5\x80\x80\x80") == 0);          // lead byte beyond U+10FFFF
  CHECK(find_invalid_utf8("\xFF") == 0);
  CHECK(find_invalid_utf8("a\xE2\x82") == 1);                 // truncated at the end
  CHECK(find_invalid_utf8("\xE2\x82" "a") == 0);              // truncated by an ASCII byte
  CHECK(find_invalid_utf8("\xF0\x9F\x98") == 0);
  CHECK(find_invalid_utf8("\xC3\xA9\xC3") == 2);
  CHECK(find_invalid_utf8("0123456789abcdefghij\x80") == 20);  // past the 8-byte ASCII fast path
}

TEST_CASE("tokenizer: GPT-2 vocabulary") {
  const Tokenizer& t = gpt2();
  CHECK(t.vocab_size() == 50257);
  CHECK(t.token_bytes(Tokenizer::kEndOfText) == "<|endoftext|>");
  CHECK(t.token_bytes(220) == " ");       // "Ġ"
  CHECK(t.token_bytes(198) == "\n");      // "Ċ"
  CHECK(t.token_bytes(995) == " world");  // "Ġworld"
  CHECK(t.encode("Hello world") == Ids{15496, 995});
  CHECK(t.encode("") == Ids{});
  // "I'M don'T it's": upper-case contractions split into apostrophe and letter.
  CHECK(t.encode("I'M don'T it's") == Ids{40, 6, 44, 836, 6, 51, 340, 338});
  // The end-of-text marker in text is just text: "<|", "endoftext", "|>" and never id 50256.
  for (int id : t.encode("<|endoftext|>")) CHECK(id != Tokenizer::kEndOfText);
  Ids appended{7};
  t.encode("Hello", appended);
  CHECK(appended == Ids{7, 15496});
}

TEST_CASE("tokenizer: GPT-2's \\s for U+0085 and U+FEFF, where the JavaScript encoder differs") {
  const Tokenizer& t = gpt2();
  // " \u0085x": U+0085 is whitespace, so " \u0085" is a whitespace run before "x" that gives back
  // its last character: pieces " ", "\u0085", "x". " " is "Ġ" (220); U+0085 is bytes C2 85, written
  // "Â" (126) "ħ" (227), and vocab.bpe has no merge "Â ħ"; "x" is 87. (The JavaScript encoder takes
  // U+0085 for a symbol, reads the piece " \u0085" and merges "Ġ Â" into "ĠÂ": 1587 227 87.)
  CHECK(t.encode(" \u0085x") == Ids{220, 126, 227, 87});
  // " \ufeffx": U+FEFF is a symbol (category Cf), so the space joins it: pieces " \ufeff", "x".
  // Bytes 20 EF BB BF are "Ġ" "ï" "»" "¿"; the only merge among them is "Ġ ï" -> "Ġï" (27332),
  // leaving "»" (119) and "¿" (123). (The JavaScript encoder takes U+FEFF for whitespace and
  // gives 220 171 119 123 87.)
  CHECK(t.encode(" \ufeffx") == Ids{27332, 119, 123, 87});
  // "\ufeff\n": the symbol U+FEFF ("ï" "»" "¿" = 171 119 123) and then the newline "Ċ" (198).
  CHECK(t.encode("\ufeff\n") == Ids{171, 119, 123, 198});
}

TEST_CASE("tokenizer: BPE merges the lowest rank first, all occurrences left to right") {
  // A vocabulary with GPT-2's tokens but only the merges listed here (ids from encoder.json:
  // a 64, b 65, c 66, aa 7252, aaa 46071, ab 397, bc 15630).
  const std::string encoder = llmc::default_encoder_path();
  const TempDir dir;
  // "a a" merges non-overlapping pairs from the left: aa aa a.
  CHECK(Tokenizer(encoder, dir.write("aa.bpe", "#version: 0.2\na a\n")).encode("aaaaa") == Ids{7252, 7252, 64});
  // Round 1 (rank 0): aa aa a. Round 2 (rank 1, "aa a"): the pair (aa, a) at the end: aa aaa.
  CHECK(Tokenizer(encoder, dir.write("aa_aaa.bpe", "#version: 0.2\na a\naa a\n")).encode("aaaaa") ==
        Ids{7252, 46071});
  // b c first: a bc
  CHECK(Tokenizer(encoder, dir.write("bc_ab.bpe", "#version: 0.2\nb c\na b\n")).encode("abc") == Ids{64, 15630});
  // a b first: ab c
  CHECK(Tokenizer(encoder, dir.write("ab_bc.bpe", "#version: 0.2\na b\nb c\n")).encode("abc") == Ids{397, 66});
}

TEST_CASE("tokenizer: encode and decode round trip byte for byte") {
  const Tokenizer& t = gpt2();
  const std::vector<std::string> texts = {
      "The quick brown fox.\n\n  Indented\ttab\r\n", "\xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9",
      "e\xCC\x81 \xC2\x85 \xEF\xBB\xBF", std::string(10000, 'a'), std::string(3000, ' ') + "x", "<|endoftext|>",
      std::string("\0\x01\x7F", 3)};
  for (const auto& text : texts) CHECK(t.decode(t.encode(text)) == text);
}

TEST_CASE("tokenizer: decoding arbitrary ids never fails; bad ids are named") {
  const Tokenizer& t = gpt2();
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> id(0, t.vocab_size() - 1);
  Ids ids(5000);
  size_t length = 0;
  for (int& x : ids) {
    x = id(rng);
    length += t.token_bytes(x).size();
  }
  CHECK(t.decode(ids).size() == length);
  CHECK(error_of([&] { t.token_bytes(50257); }).find("token id 50257") != std::string::npos);
  CHECK_THROWS_AS(t.token_bytes(-1), std::out_of_range);
  CHECK_THROWS_AS(t.decode(Ids{15496, -3}), std::out_of_range);
}

TEST_CASE("tokenizer: invalid UTF-8 is rejected with its byte offset") {
  const Tokenizer& t = gpt2();
  CHECK_THROWS_AS(t.encode("ok\xC3"), std::invalid_argument);
  CHECK(error_of([&] { t.encode("abc\xED\xA0\x80"); }) == "invalid UTF-8 at byte offset 3");
  Ids out{1};
  CHECK_THROWS(t.encode("\xFF", out));
  CHECK(out == Ids{1});  // nothing appended
}

TEST_CASE("tokenizer: vocabulary files with problems are named in the error") {
  const std::string encoder = llmc::default_encoder_path();
  const std::string vocab = llmc::default_vocab_bpe_path();
  std::string e = error_of([&] { Tokenizer("no/such/encoder.json", vocab); });
  CHECK(e.find("no/such/encoder.json: cannot open") != std::string::npos);
  // A missing file (a fresh clone before `make setup`) says what installs the vocabulary.
  CHECK(e.find("`make setup` installs data/encoder.json and data/vocab.bpe") != std::string::npos);
  e = error_of([&] { Tokenizer(encoder, "no/such/vocab.bpe"); });
  CHECK(e.find("no/such/vocab.bpe: cannot open") != std::string::npos);
  CHECK(e.find("`make setup` installs") != std::string::npos);

  const TempDir dir;
  const std::string bad_json = dir.write("bad.json", R"({"a": 0, "b": })");
  e = error_of([&] { Tokenizer(bad_json, vocab); });
  CHECK(e.find(bad_json + ": JSON error at byte 14") != std::string::npos);
  const std::string no_bytes = dir.write("no_bytes.json", R"({"a": 0})");
  e = error_of([&] { Tokenizer(no_bytes, vocab); });
  CHECK(e.find("no token for the single byte 0x00") != std::string::npos);
  const std::string gap = dir.write("gap.json", R"({"a": 0, "b": 2})");
  e = error_of([&] { Tokenizer(gap, vocab); });
  CHECK(e.find("token id 1 is missing") != std::string::npos);
  const std::string not_bytes = dir.write("not_bytes.json", "{\"\xE4\xB8\xAD\": 0}");  // 中 is no byte character
  e = error_of([&] { Tokenizer(not_bytes, vocab); });
  CHECK(e.find("U+4E2D is not one of GPT-2's byte characters") != std::string::npos);

  const std::string three_parts = dir.write("three.bpe", "#version: 0.2\nĠ t\nĠ a b\n");
  e = error_of([&] { Tokenizer(encoder, three_parts); });
  CHECK(e.find(three_parts + ": line 3: expected two tokens") != std::string::npos);
  const std::string unknown = dir.write("unknown.bpe", "#version: 0.2\nĠt Ġq\n");
  e = error_of([&] { Tokenizer(encoder, unknown); });
  CHECK(e.find(unknown + ": line 2: merged token 'ĠtĠq' is not in the encoder") != std::string::npos);
}

TEST_CASE("tokenizer: concurrent encoding from many threads gives the single-threaded ids") {
  const Tokenizer& t = gpt2();
  std::vector<std::string> docs;
  for (int i = 0; i < 200; ++i)
    docs.push_back("Document " + std::to_string(i) + ": the same words again and again, " + std::string(i % 7, ' ') +
                   "with numbers " + std::to_string(i * 7919) + " and \xE4\xB8\xAD\xE6\x96\x87.");
  std::vector<Ids> serial;
  for (const auto& d : docs) serial.push_back(t.encode(d));
  std::vector<std::vector<Ids>> parallel(4, std::vector<Ids>(docs.size()));
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (size_t i = 0; i < docs.size(); ++i) parallel[k][(i + 50 * k) % docs.size()] = t.encode(docs[(i + 50 * k) % docs.size()]);
    });
  for (auto& th : threads) th.join();
  for (int k = 0; k < 4; ++k) CHECK(parallel[k] == serial);
}
