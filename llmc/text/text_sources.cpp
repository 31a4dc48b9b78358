#include "llmc/text/text_sources.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <stdexcept>
#include <unistd.h>

#include "llmc/io/json.h"
#include "llmc/text/utf8.h"

namespace llmc {

namespace {

// A plain read-only file read in chunks of a fixed size.
class InputFile {
 public:
  InputFile(const std::string& path, size_t chunk) : path_(path), chunk_(std::max<size_t>(chunk, 1)) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw std::runtime_error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  ~InputFile() { ::close(fd_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }

  // Appends up to one chunk to `buf`; returns how many bytes came (0 at the end of the file).
  size_t append_chunk(std::string& buf) {
    const size_t old = buf.size();
    buf.resize(old + chunk_);
    ssize_t n;
    do n = ::read(fd_, &buf[old], chunk_);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
      buf.resize(old);
      throw std::runtime_error(fmt::format("{}: read failed: {}", path_, std::strerror(errno)));
    }
    buf.resize(old + size_t(n));
    return size_t(n);
  }

  std::string read_all() {
    std::string all;
    while (append_chunk(all) > 0) {}
    return all;
  }

 private:
  std::string path_;
  size_t chunk_;
  int fd_ = -1;
};

// A sliding window over a file: bytes before pos_ are consumed and dropped at the next refill, so
// memory stays at about one chunk plus the longest item being parsed.
class Window {
 public:
  Window(const std::string& path, size_t chunk) : file_(path, chunk) {}

  const std::string& path() const { return file_.path(); }
  uint64_t consumed() const { return base_ + pos_; }

  // Buffers at least `n` unconsumed bytes if the file still has them; returns whether it could.
  bool ensure(size_t n) {
    while (buf_.size() - pos_ < n) {
      if (eof_) return false;
      compact();
      if (file_.append_chunk(buf_) == 0) eof_ = true;
    }
    return true;
  }

  // The next byte, or -1 at the end of the file.
  int peek() { return ensure(1) ? static_cast<unsigned char>(buf_[pos_]) : -1; }

  void skip_whitespace() {
    while (ensure(1)) {
      pos_ = json::skip_whitespace(buf_, pos_);
      if (pos_ < buf_.size()) return;
    }
  }

  // Reads the next line (without its '\n'); false at the end of the file.
  bool read_line(std::string& line) {
    size_t scanned = 0;
    while (true) {
      const size_t nl = buf_.find('\n', pos_ + scanned);
      if (nl != std::string::npos) {
        line.assign(buf_, pos_, nl - pos_);
        pos_ = nl + 1;
        return true;
      }
      scanned = buf_.size() - pos_;
      if (!ensure(scanned + 1)) {
        if (scanned == 0) return false;
        line.assign(buf_, pos_, scanned);
        pos_ += scanned;
        return true;
      }
    }
  }

  // Decodes the JSON string literal that starts at the current byte (a '"'); `line` receives the
  // line it starts on. Refills until the closing quote is buffered.
  std::string read_string_literal(int64_t& line) {
    line = line_of(pos_);
    size_t off = 1;
    while (true) {
      while (pos_ + off < buf_.size()) {
        const char c = buf_[pos_ + off];
        if (c == '"') {
          try {
            return json::parse_string(buf_, pos_);
          } catch (const json::JsonError& e) {
            fail_at(e.offset, e.reason);
          }
        }
        off += c == '\\' ? 2 : 1;
      }
      if (!ensure(off + 1)) fail_at(pos_, "unterminated string at the end of the file");
    }
  }

  void advance() { ++pos_; }

  // Throws a "malformed JSON" error at buffer index `index`, with its line and file byte offset.
  [[noreturn]] void fail_at(size_t index, const std::string& reason) const {
    throw std::runtime_error(fmt::format("{}: line {}: malformed JSON at byte {}: {}", path(), line_of(index),
                                         base_ + index, reason));
  }
  [[noreturn]] void fail_here(const std::string& reason) const { fail_at(pos_, reason); }

 private:
  // Newlines are counted incrementally from the last index asked about, so asking once per
  // document costs O(bytes) over the whole file rather than O(bytes) per document.
  int64_t line_of(size_t index) const {
    index = std::min(index, buf_.size());
    if (index < counted_index_) {
      counted_index_ = 0;
      counted_line_ = line_base_;
    }
    counted_line_ += std::count(buf_.begin() + counted_index_, buf_.begin() + index, '\n');
    counted_index_ = index;
    return counted_line_;
  }

  void compact() {
    line_base_ = line_of(pos_);
    base_ += pos_;
    buf_.erase(0, pos_);
    pos_ = 0;
    counted_index_ = 0;
    counted_line_ = line_base_;
  }

  InputFile file_;
  std::string buf_;
  size_t pos_ = 0;         // first unconsumed byte of buf_
  uint64_t base_ = 0;      // file offset of buf_[0]
  int64_t line_base_ = 1;  // line number of buf_[0]
  mutable size_t counted_index_ = 0;  // line_of's cache: buf_[counted_index_] is on line counted_line_
  mutable int64_t counted_line_ = 1;
  bool eof_ = false;
};

class TextFileSource : public DocumentSource {
 public:
  TextFileSource(const std::string& path, size_t chunk, bool brown) : file_(path, chunk), brown_(brown) {}

  bool next(std::string& text) override {
    if (done_) return false;
    done_ = true;
    text = file_.read_all();
    consumed_ = text.size();
    // Brown files are checked before rebuilding so the offset points into the file itself.
    const size_t bad = find_invalid_utf8(text);
    if (bad != std::string_view::npos)
      throw std::runtime_error(fmt::format("{}: invalid UTF-8 at byte {}", file_.path(), bad));
    if (brown_) text = brown_to_text(text);
    return true;
  }
  uint64_t bytes_consumed() const override { return consumed_; }

 private:
  InputFile file_;
  bool brown_;
  bool done_ = false;
  uint64_t consumed_ = 0;
};

class JsonLinesSource : public DocumentSource {
 public:
  JsonLinesSource(const std::string& path, size_t chunk) : window_(path, chunk) {}

  bool next(std::string& text) override {
    while (window_.read_line(line_)) {
      ++line_no_;
      if (json::skip_whitespace(line_, 0) == line_.size()) continue;
      json::Value record;
      try {
        record = json::parse(line_);
      } catch (const json::JsonError& e) {
        throw std::runtime_error(fmt::format("{}: line {}: malformed JSON at column {}: {}", window_.path(), line_no_,
                                             e.offset + 1, e.reason));
      }
      if (record.kind != json::Value::Kind::Object)
        throw std::runtime_error(fmt::format("{}: line {}: expected a JSON object with a \"text\" field", window_.path(), line_no_));
      const auto entry = record.object.find("text");
      if (entry == record.object.end())
        throw std::runtime_error(fmt::format("{}: line {}: the object has no \"text\" field", window_.path(), line_no_));
      json::Value& field = entry->second;
      if (field.kind != json::Value::Kind::String)
        throw std::runtime_error(fmt::format("{}: line {}: the \"text\" field is not a string", window_.path(), line_no_));
      const size_t bad = find_invalid_utf8(field.string);
      if (bad != std::string_view::npos)
        throw std::runtime_error(fmt::format("{}: line {}: invalid UTF-8 at byte {} of the \"text\" string (after JSON unescaping)",
                                             window_.path(), line_no_, bad));
      text = std::move(field.string);
      return true;
    }
    return false;
  }
  uint64_t bytes_consumed() const override { return window_.consumed(); }

 private:
  Window window_;
  std::string line_;  // reused from line to line, so reading a record allocates no line buffer
  int64_t line_no_ = 0;
};

class JsonArraySource : public DocumentSource {
 public:
  JsonArraySource(const std::string& path, size_t chunk) : window_(path, chunk) {}

  bool next(std::string& text) override {
    if (done_) return false;
    window_.skip_whitespace();
    if (!started_) {
      if (window_.peek() != '[') window_.fail_here("expected '[': the file must hold a JSON array of strings");
      window_.advance();
      started_ = true;
      window_.skip_whitespace();
      if (window_.peek() == ']') return finish();
    } else {
      const int c = window_.peek();
      if (c == ']') return finish();
      if (c == -1) window_.fail_here("unexpected end of file: the array is not closed with ']'");
      if (c != ',') window_.fail_here("expected ',' or ']' after an array element");
      window_.advance();
      window_.skip_whitespace();
    }
    if (window_.peek() != '"')
      window_.fail_here(fmt::format("array element [{}] is not a string (expected an array of strings)", index_));
    int64_t line = 0;
    text = window_.read_string_literal(line);
    const size_t bad = find_invalid_utf8(text);
    if (bad != std::string_view::npos)
      throw std::runtime_error(fmt::format("{}: line {}, array element [{}]: invalid UTF-8 at byte {} of the string (after JSON unescaping)",
                                           window_.path(), line, index_, bad));
    ++index_;
    return true;
  }
  uint64_t bytes_consumed() const override { return window_.consumed(); }

 private:
  bool finish() {
    window_.advance();
    window_.skip_whitespace();
    if (window_.peek() != -1) window_.fail_here("unexpected characters after the closing ']'");
    done_ = true;
    return false;
  }

  Window window_;
  bool started_ = false;
  bool done_ = false;
  int64_t index_ = 0;
};

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

bool closes(std::string_view w) {
  return w == "," || w == "." || w == ";" || w == ":" || w == "?" || w == "!" || w == ")" || w == "]" || w == "''" ||
         w == "'";
}

bool opens(std::string_view w) { return w == "``" || w == "(" || w == "["; }

}  // namespace

InputFormat detect_format(const std::string& path, bool brown) {
  if (ends_with(path, ".txt")) return InputFormat::Text;
  if (ends_with(path, ".jsonl")) return InputFormat::JsonLines;
  if (ends_with(path, ".json")) return InputFormat::JsonArray;
  if (brown) return InputFormat::Brown;
  throw std::runtime_error(fmt::format(
      "{}: unknown input type (expected a .txt, .jsonl or .json file; use --brown for Brown-corpus files)", path));
}

std::unique_ptr<DocumentSource> open_source(const std::string& path, InputFormat format, size_t read_chunk) {
  switch (format) {
    case InputFormat::Text: return std::make_unique<TextFileSource>(path, read_chunk, false);
    case InputFormat::Brown: return std::make_unique<TextFileSource>(path, read_chunk, true);
    case InputFormat::JsonLines: return std::make_unique<JsonLinesSource>(path, read_chunk);
    case InputFormat::JsonArray: return std::make_unique<JsonArraySource>(path, read_chunk);
  }
  throw std::logic_error("open_source: unhandled input format");
}

std::string brown_to_text(std::string_view tagged) {
  std::string out;
  bool paragraph_open = false;  // a word of the current paragraph has been written
  bool paragraph_break = false; // a blank line ended a paragraph since the last word
  bool glue_next = false;       // the previous word opens (a quote or bracket): no space after it
  size_t line_start = 0;
  while (line_start <= tagged.size()) {
    size_t line_end = tagged.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = tagged.size();
    const std::string_view line = tagged.substr(line_start, line_end - line_start);
    line_start = line_end + 1;
    if (std::all_of(line.begin(), line.end(), is_space)) {
      if (paragraph_open) paragraph_break = true;
      paragraph_open = false;
      continue;
    }
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && is_space(line[i])) ++i;
      size_t j = i;
      while (j < line.size() && !is_space(line[j])) ++j;
      if (j == i) break;
      std::string_view word = line.substr(i, j - i);
      i = j;
      const size_t slash = word.rfind('/');
      if (slash != std::string_view::npos && slash > 0) word = word.substr(0, slash);
      if (paragraph_break) {
        out += '\n';
        paragraph_break = false;
      } else if (!out.empty() && !glue_next && !closes(word)) {
        out += ' ';
      }
      out += (word == "``" || word == "''") ? std::string_view("\"") : word;
      glue_next = opens(word);
      paragraph_open = true;
    }
  }
  return out;
}

}  // namespace llmc
