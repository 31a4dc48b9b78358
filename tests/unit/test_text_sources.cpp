#include <doctest/doctest.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "llmc/text/text_sources.h"
#include "tests/unit/test_support.h"

using namespace llmc;
using namespace test_support;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> read_all(const std::string& path, InputFormat format, size_t chunk) {
  auto source = open_source(path, format, chunk);
  std::vector<std::string> docs;
  std::string text;
  while (source->next(text)) docs.push_back(text);
  CHECK(source->bytes_consumed() == fs::file_size(path));
  CHECK_FALSE(source->next(text));
  return docs;
}

// The message of the error reading all of `path` throws (empty if none).
std::string read_error(const std::string& path, InputFormat format, size_t chunk = kDefaultReadChunk) {
  return error_message([&] {
    auto source = open_source(path, format, chunk);
    std::string text;
    while (source->next(text)) {}
  });
}

const std::vector<size_t> kChunkSizes = {1, 2, 3, 7, 16, kDefaultReadChunk};

// A file `name` holding `content` reads as `expected` with every read size: the small ones make
// documents straddle refills.
void check_documents(const std::string& name, const std::string& content, InputFormat format,
                     const std::vector<std::string>& expected) {
  const TempDir dir;
  const std::string path = dir.write(name, content);
  for (size_t chunk : kChunkSizes) {
    CAPTURE(chunk);
    CHECK(read_all(path, format, chunk) == expected);
  }
}

}  // namespace

TEST_CASE("text sources: the format comes from the extension or --brown") {
  CHECK(detect_format("a/b.txt", false) == InputFormat::Text);
  CHECK(detect_format("b.jsonl", false) == InputFormat::JsonLines);
  CHECK(detect_format("b.json", false) == InputFormat::JsonArray);
  CHECK(detect_format("ca01", true) == InputFormat::Brown);
  CHECK(detect_format("x.json", true) == InputFormat::JsonArray);
  CHECK(detect_format("x.txt", true) == InputFormat::Text);
  const std::string err = thrown_message([] { detect_format("data/x.csv", false); });
  CHECK(contains(err, "data/x.csv"));
  CHECK_THROWS_AS(detect_format("ca01", false), std::runtime_error);
}

TEST_CASE("text sources: a .txt file is one document, byte for byte") {
  const std::string content = "line one\n\nline two \xE2\x82\xAC\r\n";
  check_documents("a.txt", content, InputFormat::Text, {content});
  TempDir dir;
  CHECK(read_all(dir.write("empty.txt", ""), InputFormat::Text, 4) == std::vector<std::string>{""});
  const std::string err = read_error(dir.path + "/missing.txt", InputFormat::Text);
  CHECK(contains(err, dir.path + "/missing.txt"));
}

TEST_CASE("text sources: JSONL records, escapes, blank lines and records split across reads") {
  check_documents("a.jsonl",
                  "{\"id\": 1, \"text\": \"plain\"}\n"
                  "\n"
                  "  {\"text\": \"tab\\tquote\\\" slash\\\\ \\u00e9 \\ud83d\\ude00 nl\\n\", \"extra\": [1, {\"a\": null}]}\r\n"
                  "{\"meta\": \"x\", \"text\": \"\"}\n"
                  "{\"text\": \"last line without a newline, longer than the small read chunks\"}",
                  InputFormat::JsonLines,
                  {"plain", "tab\tquote\" slash\\ \xC3\xA9 \xF0\x9F\x98\x80 nl\n", "",
                   "last line without a newline, longer than the small read chunks"});
}

TEST_CASE("text sources: JSONL errors name the file and line") {
  TempDir dir;
  const std::string bad_json = dir.write("bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"x\",}\n");
  std::string err = read_error(bad_json, InputFormat::JsonLines, 3);
  CHECK(contains(err, bad_json + ": line 2"));
  CHECK(contains(err, "malformed JSON"));

  const std::string no_text = dir.write("notext.jsonl", "{\"text\": \"ok\"}\n\n{\"body\": \"x\"}\n");
  err = read_error(no_text, InputFormat::JsonLines);
  CHECK(contains(err, no_text + ": line 3"));
  CHECK(contains(err, "\"text\""));

  err = read_error(dir.write("num.jsonl", "{\"text\": 5}\n"), InputFormat::JsonLines);
  CHECK(contains(err, "line 1"));
  CHECK(contains(err, "not a string"));
  CHECK(contains(read_error(dir.write("arr.jsonl", "[\"a\"]\n"), InputFormat::JsonLines), "line 1"));
}

TEST_CASE("text sources: a JSON array of strings streams element by element") {
  check_documents("a.json",
                  "[\n"
                  "  \"first document\",\n"
                  "  \"esc \\\"q\\\" \\\\ \\/ \\u4e2d \\ud83d\\ude00\\n\",\n"
                  "  \"\",\"no space\" ,\n"
                  "  \"a document that is much longer than any of the tiny read chunks used here\"\n"
                  "]\n",
                  InputFormat::JsonArray,
                  {"first document", "esc \"q\" \\ / \xE4\xB8\xAD \xF0\x9F\x98\x80\n", "", "no space",
                   "a document that is much longer than any of the tiny read chunks used here"});
  TempDir dir;
  CHECK(read_all(dir.write("empty.json", " [ ] "), InputFormat::JsonArray, 1).empty());
}

TEST_CASE("text sources: malformed JSON arrays are errors with the line number") {
  TempDir dir;
  struct Case { const char* name; const char* content; const char* expect; };
  const std::vector<Case> cases = {
      {"obj.json", "{\"text\": \"a\"}", "line 1"},
      {"number.json", "[\"a\",\n\"b\",\n 3]", "line 3"},
      {"comma.json", "[\"a\"\n\n \"b\"]", "line 3"},
      {"open.json", "[\"a\",\n\"b\"\n", "line 3"},
      {"unterminated.json", "[\"a\",\n\"b", "line 2"},
      {"trailing.json", "[\"a\"]\n]", "line 2"},
      {"escape.json", "[\"a\",\n \"bad \\q escape\"]", "line 2"},
      {"trailing_comma.json", "[\"a\",\n]", "line 2"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const std::string path = dir.write(c.name, c.content);
    for (size_t chunk : {size_t(1), size_t(4), kDefaultReadChunk}) {
      const std::string err = read_error(path, InputFormat::JsonArray, chunk);
      CHECK(contains(err, path + ": " + c.expect));
    }
  }
  CHECK(contains(read_error(dir.write("n.json", "[\"a\", 3]"), InputFormat::JsonArray), "element [1]"));
}

TEST_CASE("text sources: invalid UTF-8 is reported with the file and position") {
  TempDir dir;
  const std::string txt = dir.write("bad.txt", "abc\n\xC3\xA9x\xFFyz");
  CHECK(read_error(txt, InputFormat::Text, 2) == txt + ": invalid UTF-8 at byte 7");

  const std::string jsonl = dir.write("bad.jsonl", "{\"text\": \"fine\"}\n{\"text\": \"ab\xC3\"}\n");
  const std::string err = read_error(jsonl, InputFormat::JsonLines);
  CHECK(contains(err, jsonl + ": line 2"));
  CHECK(contains(err, "invalid UTF-8 at byte 2"));

  const std::string json = dir.write("bad.json", "[\"ok\",\n \"ok\",\n \"\xE2\x82 broken\"]");
  const std::string jerr = read_error(json, InputFormat::JsonArray, 3);
  CHECK(contains(jerr, json + ": line 3, array element [2]"));
  CHECK(contains(jerr, "invalid UTF-8 at byte 0"));

  const std::string brown = dir.write("cz01", "\tThe/at \xED\xA0\x80/nn\n");
  CHECK(read_error(brown, InputFormat::Brown) == brown + ": invalid UTF-8 at byte 8");
}

TEST_CASE("text sources: Brown tags are stripped and sentences rebuilt") {
  CHECK(brown_to_text("\tThe/at jury/nn said/vbd ./.\n") == "The jury said.");
  // Quotes, commas, brackets and a question mark inside a closing quote.
  CHECK(brown_to_text("\t``/`` Only/rb a/at handful/nn ''/'' ,/, the/at jury/nn said/vbd (/( again/rb )/) ./.") ==
        "\"Only a handful\", the jury said (again).");
  CHECK(brown_to_text("\tHe/pps asked/vbd ,/, ``/`` Why/wrb ?/. ''/''\n") == "He asked, \"Why?\"");
  // The tag starts at the LAST slash; a word may contain slashes and apostrophes.
  CHECK(brown_to_text("1/2/cd of/in Atlanta's/np$ votes/nns ;/. done/vbn :/: yes/rb !/.") ==
        "1/2 of Atlanta's votes; done: yes!");
  CHECK(brown_to_text("the/at `secret'/nn and/cc his/pp$ '/' friends/nns") == "the `secret' and his' friends");
  CHECK(brown_to_text("a/at --/-- b/nn") == "a -- b");
  // Sentences of a paragraph are joined by a space, paragraphs by a newline.
  const std::string tagged =
      "\n\n\tFirst/od sentence/nn ./.\nSecond/od one/cd ./.\n\n\n\tNew/jj paragraph/nn ./.\n\n";
  CHECK(brown_to_text(tagged) == "First sentence. Second one.\nNew paragraph.");
  CHECK(brown_to_text("") == "");
  CHECK(brown_to_text("\n\n\t\n") == "");
}

TEST_CASE("text sources: a Brown file is one rebuilt document") {
  check_documents("ca99", "\n\n\tThe/at Fulton/np-tl jury/nn ./.\n\n\n\tIt/pps ended/vbd ./.\n", InputFormat::Brown,
                  {"The Fulton jury.\nIt ended."});
}
