// A small JSON reader: enough for GPT-2's encoder.json, JSONL records and arrays of strings.
// Strings are returned as UTF-8; \u escapes (including surrogate pairs) are decoded. Malformed
// input throws JsonError with the byte offset of the problem.
#pragma once
#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace llmc::json {

struct JsonError : std::runtime_error {
  JsonError(size_t offset, const std::string& reason);
  size_t offset;
  // what() without the "JSON error at byte N: " prefix, for callers that report a position of
  // their own (the offset is relative to whatever view was parsed, not to a file).
  std::string reason;
};

struct Value {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Value> array;
  std::map<std::string, Value> object;

  // The member named `key` of an object, or nullptr if absent or if this is not an object.
  const Value* find(const std::string& key) const;
};

// Parses one complete JSON document (trailing whitespace allowed, nothing else).
Value parse(std::string_view text);

// Skips JSON whitespace starting at pos; returns the new position.
size_t skip_whitespace(std::string_view text, size_t pos);

// Decodes the string literal that starts at text[pos] (which must be '"'); on return pos is just
// past the closing quote. Lone surrogate escapes are an error (they have no UTF-8 encoding).
std::string parse_string(std::string_view text, size_t& pos);

// Parses the value that starts at text[pos] (after whitespace); on return pos is just past it.
Value parse_value(std::string_view text, size_t& pos);

}  // namespace llmc::json
