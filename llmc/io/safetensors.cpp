#include "llmc/io/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "llmc/gpt2.h"
#include "llmc/io/json.h"

namespace llmc {

// Tensor bytes are copied as they are: the file is little-endian and so must the host be.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");

namespace {

// The reference implementation refuses headers above 100 MB; a larger length is a corrupt file,
// and refusing it early avoids a huge allocation.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// Integers in the header arrive as JSON doubles, exact up to 2^53.
constexpr double kMaxExactInteger = 9007199254740992.0;

// Product of the dimensions (1 for a scalar).
size_t numel_of(const std::vector<size_t>& shape) {
  size_t n = 1;
  for (size_t d : shape) n *= d;
  return n;
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {}", path, what));
}

// The non-negative integer in `v`, or an error naming `what`.
size_t header_integer(const json::Value& v, const std::string& path, const std::string& what) {
  if (v.kind != json::Value::Kind::Number || v.number < 0 || v.number != std::floor(v.number) ||
      v.number > kMaxExactInteger)
    fail(path, fmt::format("{} must be a non-negative integer", what));
  return size_t(v.number);
}

bool parse_dtype(const std::string& s, DType& dtype) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    if (s == dtype_name(d)) {
      dtype = d;
      return true;
    }
  }
  return false;
}

SafeTensor parse_tensor_entry(const std::string& name, const json::Value& entry, size_t data_size,
                              const std::string& path) {
  const std::string where = fmt::format("tensor '{}'", name);
  if (entry.kind != json::Value::Kind::Object) fail(path, where + ": header entry is not a JSON object");
  SafeTensor t;
  t.name = name;

  const json::Value* dtype = entry.find("dtype");
  if (dtype == nullptr || dtype->kind != json::Value::Kind::String)
    fail(path, where + ": missing or non-string \"dtype\"");
  if (!parse_dtype(dtype->string, t.dtype))
    fail(path, fmt::format("{}: unsupported dtype '{}' (supported: F32, BF16, F16)", where, dtype->string));

  const json::Value* shape = entry.find("shape");
  if (shape == nullptr || shape->kind != json::Value::Kind::Array)
    fail(path, where + ": missing or non-array \"shape\"");
  size_t numel = 1;
  for (const json::Value& d : shape->array) {
    const size_t dim = header_integer(d, path, where + ": every shape entry");
    if (dim != 0 && numel > SIZE_MAX / dim / dtype_size(t.dtype)) fail(path, where + ": shape is too large");
    numel *= dim;
    t.shape.push_back(dim);
  }

  const json::Value* offsets = entry.find("data_offsets");
  if (offsets == nullptr || offsets->kind != json::Value::Kind::Array || offsets->array.size() != 2)
    fail(path, where + ": \"data_offsets\" must be an array [begin, end]");
  t.begin = header_integer(offsets->array[0], path, where + ": data_offsets begin");
  t.end = header_integer(offsets->array[1], path, where + ": data_offsets end");
  if (t.begin > t.end) fail(path, fmt::format("{}: data_offsets [{}, {}] end before they begin", where, t.begin, t.end));
  if (t.end > data_size)
    fail(path, fmt::format("{}: data_offsets [{}, {}] lie outside the {}-byte data buffer", where, t.begin,
                           t.end, data_size));
  const size_t expected = numel * dtype_size(t.dtype);
  if (t.end - t.begin != expected)
    fail(path, fmt::format("{}: {} bytes in data_offsets, but shape and dtype {} need {}", where,
                           t.end - t.begin, dtype_name(t.dtype), expected));
  return t;
}

std::map<std::string, std::string> parse_metadata(const json::Value& v, const std::string& path) {
  if (v.kind != json::Value::Kind::Object) fail(path, "\"__metadata__\" is not a JSON object");
  std::map<std::string, std::string> metadata;
  for (const auto& [key, value] : v.object) {
    if (value.kind != json::Value::Kind::String)
      fail(path, fmt::format("\"__metadata__\" value of '{}' is not a string", key));
    metadata[key] = value.string;
  }
  return metadata;
}

// Walks the header's top-level object by hand (rather than json::parse) so that duplicate names,
// which a map would silently merge, are caught.
void parse_header(std::string_view header, size_t data_size, SafeTensorsFile& file) {
  const std::string& path = file.path;
  try {
    size_t pos = json::skip_whitespace(header, 0);
    if (pos >= header.size() || header[pos] != '{') fail(path, "header is not a JSON object");
    pos = json::skip_whitespace(header, pos + 1);
    std::set<std::string> seen;
    bool first = true;
    while (true) {
      if (pos >= header.size()) fail(path, "header JSON ends inside the top-level object");
      if (header[pos] == '}') {
        ++pos;
        break;
      }
      if (!first) {
        if (header[pos] != ',') fail(path, fmt::format("header JSON: expected ',' or '}}' at byte {}", pos));
        pos = json::skip_whitespace(header, pos + 1);
      }
      first = false;
      if (pos >= header.size() || header[pos] != '"')
        fail(path, fmt::format("header JSON: expected a name at byte {}", pos));
      std::string name = json::parse_string(header, pos);
      pos = json::skip_whitespace(header, pos);
      if (pos >= header.size() || header[pos] != ':')
        fail(path, fmt::format("header JSON: expected ':' at byte {}", pos));
      json::Value value = json::parse_value(header, ++pos);
      pos = json::skip_whitespace(header, pos);
      if (!seen.insert(name).second) fail(path, fmt::format("header names '{}' twice", name));
      if (name == "__metadata__")
        file.metadata = parse_metadata(value, path);
      else
        file.tensors.push_back(parse_tensor_entry(name, value, data_size, path));
    }
    if (json::skip_whitespace(header, pos) != header.size())
      fail(path, fmt::format("header JSON: unexpected bytes after the object at byte {}", pos));
  } catch (const json::JsonError& e) {
    fail(path, fmt::format("malformed header: {}", e.what()));
  }
}

// The tensors, sorted by offset, must tile [0, data_size) exactly: the format has no way to say
// what stray or shared bytes would mean.
void check_tiling(SafeTensorsFile& file, size_t data_size) {
  std::stable_sort(file.tensors.begin(), file.tensors.end(), [](const SafeTensor& a, const SafeTensor& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  size_t covered = 0;
  const SafeTensor* previous = nullptr;
  for (const SafeTensor& t : file.tensors) {
    if (t.begin < covered)
      fail(file.path, fmt::format("tensor '{}' (bytes {}..{}) overlaps tensor '{}' (bytes {}..{})", t.name, t.begin,
                                  t.end, previous->name, previous->begin, previous->end));
    if (t.begin > covered)
      fail(file.path, fmt::format("bytes {}..{} of the data buffer belong to no tensor (before tensor '{}')", covered,
                                  t.begin, t.name));
    covered = t.end;
    previous = &t;
  }
  if (covered != data_size)
    fail(file.path, fmt::format("the data buffer has {} bytes but its tensors end at byte {}", data_size, covered));
}

void append_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += char(c);
    }
  }
  out += '"';
}

std::string build_header(const std::vector<TensorToWrite>& tensors, const std::map<std::string, std::string>& metadata,
                         const std::string& path) {
  std::string h = "{";
  if (!metadata.empty()) {
    h += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      if (!first) h += ',';
      first = false;
      append_json_string(h, key);
      h += ':';
      append_json_string(h, value);
    }
    h += '}';
  }
  std::set<std::string> names;
  size_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      fail(path, fmt::format("cannot write a tensor named '{}'", t.name));
    if (!names.insert(t.name).second) fail(path, fmt::format("tensor name '{}' given twice", t.name));
    if (t.data == nullptr) fail(path, fmt::format("tensor '{}' has no data", t.name));
    std::string shape;
    for (size_t d : t.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    const size_t bytes = numel_of(t.shape) * dtype_size(t.dtype);
    if (h.size() > 1) h += ',';
    append_json_string(h, t.name);
    h += fmt::format(":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}", dtype_name(t.dtype), shape,
                     offset, offset + bytes);
    offset += bytes;
  }
  h += '}';
  h.append((8 - h.size() % 8) % 8, ' ');
  return h;
}

}  // namespace

size_t dtype_size(DType dtype) { return dtype == DType::F32 ? 4 : 2; }

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "F32";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
  }
  return "?";
}

size_t SafeTensor::numel() const { return numel_of(shape); }

const SafeTensor* SafeTensorsFile::find(const std::string& name) const {
  for (const SafeTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::vector<float> SafeTensorsFile::to_float(const SafeTensor& t) const {
  const size_t n = t.numel();
  std::vector<float> out(n);
  const char* src = data.data() + t.begin;
  if (t.dtype == DType::F32) {
    std::memcpy(out.data(), src, n * 4);
    return out;
  }
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    out[i] = t.dtype == DType::BF16 ? bf16_to_float(h) : f16_to_float(h);
  }
  return out;
}

SafeTensorsFile read_safetensors(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) fail(path, "not a regular file");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail(path, "cannot open");
  const uint64_t file_size = uint64_t(in.tellg());
  in.seekg(0);
  if (file_size < 8) fail(path, fmt::format("file has {} bytes, fewer than the 8-byte header length", file_size));
  uint64_t header_size = 0;
  in.read(reinterpret_cast<char*>(&header_size), 8);
  if (header_size == 0) fail(path, "header length is 0");
  if (header_size > file_size - 8)
    fail(path, fmt::format("header length {} exceeds the {} bytes after it", header_size, file_size - 8));
  if (header_size > kMaxHeaderBytes)
    fail(path, fmt::format("header length {} is above the format's limit of {} bytes", header_size, kMaxHeaderBytes));

  std::string header(header_size, '\0');
  in.read(header.data(), std::streamsize(header_size));
  SafeTensorsFile file;
  file.path = path;
  const size_t data_size = size_t(file_size - 8 - header_size);
  parse_header(header, data_size, file);
  check_tiling(file, data_size);

  file.data.resize(data_size);
  in.read(file.data.data(), std::streamsize(data_size));
  if (!in) fail(path, "read error");
  return file;
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string header = build_header(tensors, metadata, path);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(tmp, "cannot create");
    const uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(header.data(), std::streamsize(header.size()));
    for (const TensorToWrite& t : tensors)
      out.write(static_cast<const char*>(t.data), std::streamsize(numel_of(t.shape) * dtype_size(t.dtype)));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      fail(tmp, "write error");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail(path, fmt::format("cannot rename {} to it: {}", tmp, std::strerror(errno)));
  }
}

float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h >> 15) << 31;
  const int exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(float(mantissa), -24);  // zero and subnormals: mantissa * 2^-24
  } else if (exponent == 31) {
    uint32_t bits = 0x7f800000u | (mantissa << 13);  // inf, or NaN keeping its payload
    std::memcpy(&magnitude, &bits, 4);
  } else {
    uint32_t bits = (uint32_t(exponent - 15 + 127) << 23) | (mantissa << 13);
    std::memcpy(&magnitude, &bits, 4);
  }
  uint32_t bits;
  std::memcpy(&bits, &magnitude, 4);
  bits |= sign;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

}  // namespace llmc
