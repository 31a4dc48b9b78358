#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "llmc/io/safetensors.h"
#include "tests/unit/test_support.h"

using namespace llmc;
using namespace test_support;

namespace {

// A safetensors file assembled by hand: 8-byte length (the header's, unless overridden), header, data.
std::string handmade(const std::string& header, const std::string& data, uint64_t length_field) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = char((length_field >> (8 * i)) & 0xff);
  return bytes + header + data;
}
std::string handmade(const std::string& header, const std::string& data) {
  return handmade(header, data, header.size());
}

// The error read_safetensors throws for these bytes ("" if it accepts them).
std::string read_error(const std::string& bytes) {
  const std::string path = temp_path("bad.safetensors");
  write_bytes(path, bytes);
  const std::string message = error_message([&] { read_safetensors(path); });
  std::filesystem::remove(path);
  return message;
}

// Bytes that read_safetensors must reject, and a part of the message that says why.
struct Rejected {
  std::string bytes;
  std::string reason;
};

// One check per file, so that a failure shows the reason it expected and the message it got.
void check_rejected(const std::vector<Rejected>& files) {
  for (const Rejected& f : files) {
    const std::string error = read_error(f.bytes);
    CHECK_MESSAGE(contains(error, f.reason), "'", f.reason, "' is not in '", error, "'");
  }
}

std::string le_floats(const std::vector<float>& v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

}  // namespace

TEST_CASE("safetensors: a hand-made file is read with its names, dtypes, shapes and values") {
  // F32 [2,2] = 1,2,3,4; BF16 [3] = 1.0, -2.0, 0.5 (0x3f80, 0xc000, 0x3f00); F16 [2] = 1.0, 65504.
  std::string data = le_floats({1, 2, 3, 4});
  const uint16_t halves[] = {0x3f80, 0xc000, 0x3f00, 0x3c00, 0x7bff};
  data.append(reinterpret_cast<const char*>(halves), sizeof halves);
  const std::string header =
      R"({"__metadata__": {"format": "pt"}, "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]},)"
      R"( "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},)"
      R"( "h": {"dtype": "F16", "shape": [2], "data_offsets": [22, 26]}}   )";
  const std::string path = temp_path("handmade.safetensors");
  write_bytes(path, handmade(header, data));
  const SafeTensorsFile f = read_safetensors(path);
  std::filesystem::remove(path);

  REQUIRE(f.tensors.size() == 3);
  CHECK(f.tensors[0].name == "a");  // sorted by data offset
  CHECK(f.metadata.at("format") == "pt");
  const SafeTensor* a = f.find("a");
  REQUIRE(a != nullptr);
  CHECK(a->dtype == DType::F32);
  CHECK(a->shape == std::vector<size_t>{2, 2});
  CHECK(f.to_float(*a) == std::vector<float>{1, 2, 3, 4});
  CHECK(f.to_float(*f.find("b")) == std::vector<float>{1.0f, -2.0f, 0.5f});
  CHECK(f.to_float(*f.find("h")) == std::vector<float>{1.0f, 65504.0f});
  CHECK(f.find("missing") == nullptr);
}

TEST_CASE("safetensors: write then read then write again is byte-exact") {
  std::vector<float> w(3 * 5), b(5);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(float(i)) * 1e3f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = -float(i) / 7.0f;
  w[4] = std::numeric_limits<float>::denorm_min();
  w[5] = -0.0f;
  const std::vector<uint16_t> half = {0x3f80, 0x0001, 0x8000, 0x7f80, 0x1234, 0xbeef, 0x4049};
  const std::vector<TensorToWrite> tensors = {
      {"layer.0.weight", DType::F32, {3, 5}, w.data()},
      {"name with \"quote\" and \\ backslash", DType::F32, {5}, b.data()},
      {"bf", DType::BF16, {7}, half.data()},
      {"scalar", DType::F32, {}, b.data()},
      {"empty", DType::F16, {0, 4}, half.data()},
  };
  const std::string first = temp_path("first.safetensors"), second = temp_path("second.safetensors");
  write_safetensors(first, tensors, {{"format", "pt"}, {"note", "line\nbreak"}});
  const std::string bytes = read_bytes(first);

  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  CHECK((8 + header_len) % 8 == 0);
  CHECK(bytes.compare(8, 17, "{\"__metadata__\":{") == 0);
  // The data buffer is the tensors back to back in the given order.
  const size_t data_start = 8 + header_len;
  CHECK(bytes.size() == data_start + 15 * 4 + 5 * 4 + 7 * 2 + 4);
  CHECK(std::memcmp(bytes.data() + data_start, w.data(), 60) == 0);
  CHECK(std::memcmp(bytes.data() + data_start + 80, half.data(), 14) == 0);

  const SafeTensorsFile f = read_safetensors(first);
  REQUIRE(f.tensors.size() == tensors.size());
  std::vector<TensorToWrite> again;
  for (const SafeTensor& t : f.tensors) again.push_back({t.name, t.dtype, t.shape, f.data.data() + t.begin});
  for (size_t i = 0; i < tensors.size(); ++i) {
    CHECK(f.tensors[i].name == tensors[i].name);
    CHECK(f.tensors[i].dtype == tensors[i].dtype);
    CHECK(f.tensors[i].shape == tensors[i].shape);
  }
  CHECK(f.metadata.at("note") == "line\nbreak");
  const std::vector<float> w_back = f.to_float(*f.find("layer.0.weight"));
  CHECK(std::memcmp(w_back.data(), w.data(), 60) == 0);
  write_safetensors(second, again, f.metadata);
  CHECK(read_bytes(second) == bytes);
  std::filesystem::remove(first);
  std::filesystem::remove(second);
}

TEST_CASE("safetensors: the writer refuses bad tensor lists") {
  float x = 1;
  const std::string path = temp_path("refused.safetensors");
  CHECK_THROWS_AS(write_safetensors(path, {{"a", DType::F32, {1}, &x}, {"a", DType::F32, {1}, &x}}, {}), std::runtime_error);
  CHECK_THROWS_AS(write_safetensors(path, {{"__metadata__", DType::F32, {1}, &x}}, {}), std::runtime_error);
  CHECK_THROWS_AS(write_safetensors(path, {{"", DType::F32, {1}, &x}}, {}), std::runtime_error);
  CHECK_THROWS_AS(write_safetensors(path, {{"a", DType::F32, {1}, nullptr}}, {}), std::runtime_error);
  CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("safetensors: malformed files are rejected with the file and the reason") {
  const std::string eight = le_floats({1, 2});
  const std::string ok = R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
  REQUIRE(read_error(handmade(ok, eight)).empty());

  SUBCASE("header length") {
    check_rejected({
        {"\x05\0\0", "fewer than the 8-byte header length"},
        {handmade(ok, eight, 0), "header length is 0"},
        {handmade(ok, eight, ok.size() + 9), "exceeds"},
        {handmade(ok, eight, uint64_t(1) << 62), "exceeds"},
    });
  }
  SUBCASE("offsets") {
    check_rejected({
        {handmade(R"({"t": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", eight),
         "outside the 8-byte data buffer"},
        {handmade(R"({"t": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}})", eight), "end before they begin"},
        {handmade(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                  R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                  le_floats({1, 2, 3})),
         "overlaps"},
        {handmade(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                  R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                  le_floats({1, 2, 3})),
         "belong to no tensor"},
        {handmade(ok, eight + "xxxx"), "tensors end at byte 8"},
        {handmade(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [-1, 8]}})", eight), "non-negative integer"},
        {handmade(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0.5, 8]}})", eight), "non-negative integer"},
        {handmade(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", eight), "[begin, end]"},
    });
  }
  SUBCASE("sizes and dtypes") {
    check_rejected({
        {handmade(R"({"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", eight),
         "8 bytes in data_offsets, but shape and dtype F32 need 12"},
        {handmade(R"({"t": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 8]}})", eight), "need 12"},
        {handmade(R"({"t": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", eight),
         "unsupported dtype 'I64'"},
        {handmade(R"({"t": {"shape": [2], "data_offsets": [0, 8]}})", eight), "\"dtype\""},
        {handmade(R"({"t": {"dtype": "F32", "data_offsets": [0, 8]}})", eight), "\"shape\""},
        {handmade(R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 8]}})",
                  eight),
         "too large"},
    });
  }
  SUBCASE("header JSON") {
    check_rejected({
        {handmade(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8])", eight),
         "malformed header: JSON error at byte"},
        {handmade(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})", eight),
         "header JSON ends inside the top-level object"},
        {handmade(R"([1, 2])", eight), "not a JSON object"},
        {handmade(R"({"t": 5})", eight), "not a JSON object"},
        {handmade(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}} x)", eight), "unexpected bytes"},
        {handmade(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]} "u": 1})", eight), "expected ','"},
        {handmade(R"({"t": {"dtype": F32}})", eight), "malformed header"},
        {handmade(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                  R"( "t": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                  eight),
         "names 't' twice"},
        {handmade(R"({"__metadata__": {"format": 1}})", ""), "not a string"},
    });
  }
  SUBCASE("errors name the file") {
    check_rejected({{handmade("{}", eight), "bad.safetensors"}});
  }
  CHECK_THROWS_WITH_AS(read_safetensors(temp_path("does_not_exist")), doctest::Contains("cannot open"), std::runtime_error);
  CHECK_THROWS_WITH_AS(read_safetensors(std::filesystem::temp_directory_path().string()),
                       doctest::Contains("not a regular file"), std::runtime_error);
}

TEST_CASE("safetensors: f16 widening covers normals, subnormals, zeros, infinities and NaN") {
  CHECK(f16_to_float(0x3c00) == 1.0f);
  CHECK(f16_to_float(0xc000) == -2.0f);
  CHECK(f16_to_float(0x3555) == 0.333251953125f);
  CHECK(f16_to_float(0x7bff) == 65504.0f);
  CHECK(f16_to_float(0x0400) == std::ldexp(1.0f, -14));   // smallest normal
  CHECK(f16_to_float(0x0001) == std::ldexp(1.0f, -24));   // smallest subnormal
  CHECK(f16_to_float(0x83ff) == -std::ldexp(1023.0f, -24));
  CHECK(f16_to_float(0x0000) == 0.0f);
  CHECK(std::signbit(f16_to_float(0x8000)));
  CHECK(f16_to_float(0x7c00) == std::numeric_limits<float>::infinity());
  CHECK(f16_to_float(0xfc00) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(f16_to_float(0x7e00)));
}
