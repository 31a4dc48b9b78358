// Streaming readers that turn input files into documents (UTF-8 strings) for `./tokenize shard`.
//   .txt    the whole file is one document
//   .jsonl  one JSON object per line; its "text" string field is a document (blank lines skipped)
//   .json   a JSON array of strings, each a document; parsed element by element, so the file is
//           never held in memory whole
//   other   with --brown, a tagged Brown-corpus file (`The/at jury/nn ...`) is one document,
//           rebuilt as plain text by brown_to_text
// Every reader checks that each document is valid UTF-8 and throws std::runtime_error naming the
// file and the position (byte offset in the file, or line number / array element for JSON).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace llmc {

enum class InputFormat { Text, JsonLines, JsonArray, Brown };

// How many bytes a reader asks the OS for at a time. Tests use tiny sizes so that documents
// straddle refills; a document longer than this still works (the window grows to hold it).
constexpr size_t kDefaultReadChunk = size_t(1) << 20;

class DocumentSource {
 public:
  virtual ~DocumentSource() = default;
  // Replaces `text` with the next document; returns false once the input is exhausted.
  virtual bool next(std::string& text) = 0;
  // Input bytes consumed so far (for progress reporting).
  virtual uint64_t bytes_consumed() const = 0;
};

// The format of `path` from its extension (.txt, .jsonl, .json). Any other file is a Brown-corpus
// file when `brown` is set (its files, e.g. ca01, have no extension), so one run can mix both;
// without `brown` it is an error naming the file.
InputFormat detect_format(const std::string& path, bool brown);

// Opens `path` for reading as `format`; throws naming the file if it cannot be opened.
std::unique_ptr<DocumentSource> open_source(const std::string& path, InputFormat format,
                                            size_t read_chunk = kDefaultReadChunk);

// Rebuilds plain text from Brown-corpus tagged text. Rules:
//  - a word is the part of each whitespace-separated token before its LAST '/', which starts the
//    tag (a token without a '/' after its first character is kept whole);
//  - `` and '' become a double quote ";
//  - no space before , . ; : ? ! ) ] '' and '  (closing punctuation and closing quotes);
//  - no space after `` ( [  (opening quotes and brackets);
//  - the lines of a paragraph (consecutive non-blank lines, one sentence each) are joined with a
//    space; paragraphs (separated by blank lines) are joined with one newline.
std::string brown_to_text(std::string_view tagged);

}  // namespace llmc
