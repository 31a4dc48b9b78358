#include "llmc/io/json.h"

#include <cstdlib>
#include <fmt/format.h>

namespace llmc::json {

JsonError::JsonError(size_t offset_, const std::string& reason_)
    : std::runtime_error(fmt::format("JSON error at byte {}: {}", offset_, reason_)), offset(offset_), reason(reason_) {}

const Value* Value::find(const std::string& key) const {
  if (kind != Kind::Object) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &it->second;
}

size_t skip_whitespace(std::string_view text, size_t pos) {
  while (pos < text.size() &&
         (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' || text[pos] == '\r'))
    ++pos;
  return pos;
}

static void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

static uint32_t parse_hex4(std::string_view text, size_t pos) {
  if (pos + 4 > text.size()) throw JsonError(pos, "truncated \\u escape");
  uint32_t v = 0;
  for (size_t i = pos; i < pos + 4; ++i) {
    char c = text[i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= uint32_t(c - '0');
    else if (c >= 'a' && c <= 'f') v |= uint32_t(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= uint32_t(c - 'A' + 10);
    else throw JsonError(i, "bad hex digit in \\u escape");
  }
  return v;
}

std::string parse_string(std::string_view text, size_t& pos) {
  if (pos >= text.size() || text[pos] != '"') throw JsonError(pos, "expected a string");
  std::string out;
  size_t i = pos + 1;
  while (true) {
    // Copy the plain run up to the next quote or backslash in one go.
    size_t run = i;
    while (run < text.size() && text[run] != '"' && text[run] != '\\') {
      if (static_cast<unsigned char>(text[run]) < 0x20)
        throw JsonError(run, "control character inside a string");
      ++run;
    }
    out.append(text.data() + i, run - i);
    if (run >= text.size()) throw JsonError(pos, "unterminated string");
    i = run;
    if (text[i] == '"') break;
    if (i + 1 >= text.size()) throw JsonError(i, "unterminated escape");
    char e = text[i + 1];
    i += 2;
    switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        uint32_t cp = parse_hex4(text, i);
        i += 4;
        if (cp >= 0xD800 && cp < 0xDC00) {
          // A high surrogate must be followed by an escaped low surrogate: together they encode
          // the code point 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00).
          if (i + 6 > text.size() || text[i] != '\\' || text[i + 1] != 'u')
            throw JsonError(i - 6, "high surrogate escape without a low surrogate");
          uint32_t lo = parse_hex4(text, i + 2);
          if (lo < 0xDC00 || lo >= 0xE000) throw JsonError(i, "invalid low surrogate escape");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          i += 6;
        } else if (cp >= 0xDC00 && cp < 0xE000) {
          throw JsonError(i - 6, "lone low surrogate escape");
        }
        append_utf8(out, cp);
        break;
      }
      default: throw JsonError(i - 1, fmt::format("invalid escape '\\{}'", e));
    }
  }
  pos = i + 1;
  return out;
}

static bool consume_literal(std::string_view text, size_t& pos, std::string_view lit) {
  if (text.substr(pos, lit.size()) != lit) return false;
  pos += lit.size();
  return true;
}

Value parse_value(std::string_view text, size_t& pos) {
  pos = skip_whitespace(text, pos);
  if (pos >= text.size()) throw JsonError(pos, "unexpected end of input");
  Value v;
  char c = text[pos];
  if (c == '"') {
    v.kind = Value::Kind::String;
    v.string = parse_string(text, pos);
  } else if (c == '[') {
    v.kind = Value::Kind::Array;
    pos = skip_whitespace(text, pos + 1);
    if (pos < text.size() && text[pos] == ']') { ++pos; return v; }
    while (true) {
      v.array.push_back(parse_value(text, pos));
      pos = skip_whitespace(text, pos);
      if (pos < text.size() && text[pos] == ',') { ++pos; continue; }
      if (pos < text.size() && text[pos] == ']') { ++pos; break; }
      throw JsonError(pos, "expected ',' or ']' in array");
    }
  } else if (c == '{') {
    v.kind = Value::Kind::Object;
    pos = skip_whitespace(text, pos + 1);
    if (pos < text.size() && text[pos] == '}') { ++pos; return v; }
    while (true) {
      pos = skip_whitespace(text, pos);
      std::string key = parse_string(text, pos);
      pos = skip_whitespace(text, pos);
      if (pos >= text.size() || text[pos] != ':') throw JsonError(pos, "expected ':' in object");
      ++pos;
      v.object[std::move(key)] = parse_value(text, pos);
      pos = skip_whitespace(text, pos);
      if (pos < text.size() && text[pos] == ',') { ++pos; continue; }
      if (pos < text.size() && text[pos] == '}') { ++pos; break; }
      throw JsonError(pos, "expected ',' or '}' in object");
    }
  } else if (consume_literal(text, pos, "true")) {
    v.kind = Value::Kind::Bool;
    v.boolean = true;
  } else if (consume_literal(text, pos, "false")) {
    v.kind = Value::Kind::Bool;
  } else if (consume_literal(text, pos, "null")) {
    v.kind = Value::Kind::Null;
  } else if (c == '-' || (c >= '0' && c <= '9')) {
    // strtod accepts a superset of JSON numbers; the input here is machine-written JSON.
    std::string num;
    size_t end = pos;
    while (end < text.size() && std::string_view("+-0123456789.eE").find(text[end]) != std::string_view::npos)
      ++end;
    num.assign(text.data() + pos, end - pos);
    char* parsed_end = nullptr;
    v.kind = Value::Kind::Number;
    v.number = std::strtod(num.c_str(), &parsed_end);
    if (parsed_end != num.c_str() + num.size()) throw JsonError(pos, "malformed number");
    pos = end;
  } else {
    throw JsonError(pos, fmt::format("unexpected character '{}'", c));
  }
  return v;
}

Value parse(std::string_view text) {
  size_t pos = 0;
  Value v = parse_value(text, pos);
  pos = skip_whitespace(text, pos);
  if (pos != text.size()) throw JsonError(pos, "trailing characters after the JSON value");
  return v;
}

}  // namespace llmc::json
