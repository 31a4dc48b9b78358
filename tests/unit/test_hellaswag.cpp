#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "llmc/data/hellaswag.h"
#include "tests/unit/test_support.h"

using namespace llmc;
using namespace test_support;

namespace {

// The documented record layout, written independently of the reader: delimiter, byte length,
// index, label, completion count, context length + tokens, then each completion's length + tokens.
std::vector<uint16_t> record(int index, int label, const std::vector<uint16_t>& context,
                             const std::vector<std::vector<uint16_t>>& completions) {
  std::vector<uint16_t> r = {65535, 0, uint16_t(index), uint16_t(label), uint16_t(completions.size()),
                             uint16_t(context.size())};
  r.insert(r.end(), context.begin(), context.end());
  for (const auto& c : completions) {
    r.push_back(uint16_t(c.size()));
    r.insert(r.end(), c.begin(), c.end());
  }
  r[1] = uint16_t(2 * r.size());
  return r;
}

struct EvalFileBytes {
  std::vector<int32_t> header = std::vector<int32_t>(256, 0);
  std::vector<uint16_t> body;
};

EvalFileBytes sample_file() {
  EvalFileBytes f;
  const std::vector<std::vector<uint16_t>> records = {
      record(0, 2, {10, 11, 12}, {{20}, {21, 22}, {23, 24, 25}, {26}}),
      record(1, 0, {30}, {{40, 41}, {42}, {43}, {44, 45, 46, 47}}),
      record(2, 3, {50256, 7, 8, 9}, {{1}, {2}, {3}, {4}}),
  };
  size_t longest = 0;
  for (const auto& r : records) {
    f.body.insert(f.body.end(), r.begin(), r.end());
    longest = std::max(longest, 2 * r.size());
  }
  f.header[0] = 20240522;
  f.header[1] = 1;
  f.header[2] = int32_t(records.size());
  f.header[3] = int32_t(longest);
  return f;
}

std::string write_file(const EvalFileBytes& f, const std::string& name = "eval.bin") {
  const std::string path = temp_path(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(f.header.data()), 1024);
  out.write(reinterpret_cast<const char*>(f.body.data()), std::streamsize(2 * f.body.size()));
  return path;
}

std::string read_error(const EvalFileBytes& f) {
  const std::string path = write_file(f, "bad.bin");
  const std::string message = error_message([&] { read_eval_file(path); });
  std::filesystem::remove(path);
  return message;
}

}  // namespace

TEST_CASE("hellaswag: an eval file written from the documented layout is read back") {
  const std::string path = write_file(sample_file());
  const std::vector<EvalExample> ex = read_eval_file(path);
  std::filesystem::remove(path);
  REQUIRE(ex.size() == 3);
  CHECK(ex[0].index == 0);
  CHECK(ex[0].label == 2);
  CHECK(ex[0].context == std::vector<int>{10, 11, 12});
  REQUIRE(ex[0].completions.size() == 4);
  CHECK(ex[0].completions[2] == std::vector<int>{23, 24, 25});
  CHECK(ex[1].label == 0);
  CHECK(ex[1].completions[3] == std::vector<int>{44, 45, 46, 47});
  CHECK(ex[2].context == std::vector<int>{50256, 7, 8, 9});
  CHECK(ex[2].label == 3);
}

TEST_CASE("hellaswag: malformed eval files are rejected with the file and example") {
  REQUIRE(read_error(sample_file()).empty());
  EvalFileBytes f = sample_file();
  SUBCASE("header") {
    f.header[0] = 20240520;
    CHECK(read_error(f).find("bad magic 20240520") != std::string::npos);
    f.header[0] = 20240522;
    f.header[1] = 2;
    CHECK(read_error(f).find("unsupported version 2") != std::string::npos);
    f.header[1] = 1;
    f.header[2] = 4;
    CHECK(read_error(f).find("example 3: file ends inside the record header") != std::string::npos);
    f.header[2] = 2;
    CHECK(read_error(f).find("after the last of the 2 examples") != std::string::npos);
    f.header[2] = 0;
    CHECK(read_error(f).find("header says 0 examples") != std::string::npos);
    f.header[2] = 3;
    f.header[3] += 2;
    CHECK(read_error(f).find("longest example") != std::string::npos);
  }
  SUBCASE("records") {
    // The second record starts right after the first, whose length is in body[1].
    const size_t second = f.body[1] / 2;
    EvalFileBytes g = f;
    g.body[second] = 0;
    CHECK(read_error(g).find("example 1: start delimiter is 0") != std::string::npos);
    g = f;
    g.body[second + 2] = 5;
    CHECK(read_error(g).find("example 1: record carries index 5") != std::string::npos);
    g = f;
    g.body[3] = 4;
    CHECK(read_error(g).find("example 0: label 4 is not below its 4 completions") != std::string::npos);
    g = f;
    g.body[1] += 2;  // the record claims one more word than its contents
    CHECK(read_error(g).find("example 0") != std::string::npos);
    g = f;
    g.body[1] = 7;
    CHECK(read_error(g).find("odd or too short") != std::string::npos);
    g = f;
    g.body[6] = 50257;  // first context token
    CHECK(read_error(g).find("token 50257, not below vocab size 50257") != std::string::npos);
    g = f;
    g.body[5] = 40;  // context length running past the record
    CHECK(read_error(g).find("run past the record's end") != std::string::npos);
    g = f;
    g.body.pop_back();
    CHECK(read_error(g).find("example 2") != std::string::npos);
    g = f;
    g.body.push_back(65535);
    CHECK(read_error(g).find("after the last") != std::string::npos);
  }
  SUBCASE("empty context and short file") {
    EvalFileBytes g;
    g.body = record(0, 0, {}, {{1}});
    g.header[0] = 20240522;
    g.header[1] = 1;
    g.header[2] = 1;
    g.header[3] = int32_t(2 * g.body.size());
    CHECK(read_error(g).find("the context is empty") != std::string::npos);
    const std::string path = temp_path("short.bin");
    std::ofstream(path, std::ios::binary) << "abc";
    CHECK_THROWS_WITH_AS(read_eval_file(path), doctest::Contains("shorter than the 1024-byte header"), std::runtime_error);
    std::filesystem::remove(path);
    CHECK_THROWS_WITH_AS(read_eval_file(std::filesystem::temp_directory_path().string()),
                         doctest::Contains("not a regular file"), std::runtime_error);
    CHECK_THROWS_WITH_AS(read_eval_file(temp_path("missing.bin")), doctest::Contains("cannot open"), std::runtime_error);
  }
}

TEST_CASE("hellaswag: rows put the completion tokens in the targets under the mask") {
  EvalExample ex;
  ex.index = 9;
  ex.context = {10, 11, 12};
  ex.completions = {{20}, {21, 22}};
  CHECK(eval_rows_length(ex) == 4);
  const EvalRows r = build_eval_rows(ex, 5, 99);
  CHECK(r.rows == 2);
  CHECK(r.T == 5);
  // row 0: tokens 10 11 12 20 -> inputs 10 11 12, targets 11 12 20; only the target 20 counts.
  CHECK(std::vector<int>(r.inputs.begin(), r.inputs.begin() + 5) == std::vector<int>{10, 11, 12, 99, 99});
  CHECK(std::vector<int>(r.targets.begin(), r.targets.begin() + 5) == std::vector<int>{11, 12, 20, 99, 99});
  CHECK(std::vector<uint8_t>(r.mask.begin(), r.mask.begin() + 5) == std::vector<uint8_t>{0, 0, 1, 0, 0});
  // row 1: tokens 10 11 12 21 22
  CHECK(std::vector<int>(r.inputs.begin() + 5, r.inputs.end()) == std::vector<int>{10, 11, 12, 21, 99});
  CHECK(std::vector<int>(r.targets.begin() + 5, r.targets.end()) == std::vector<int>{11, 12, 21, 22, 99});
  CHECK(std::vector<uint8_t>(r.mask.begin() + 5, r.mask.end()) == std::vector<uint8_t>{0, 0, 1, 1, 0});

  CHECK(build_eval_rows(ex, 4).T == 4);
  CHECK_THROWS_WITH_AS(build_eval_rows(ex, 3), doctest::Contains("eval example 9"), std::invalid_argument);
}

TEST_CASE("hellaswag: the prediction is the completion with the lowest mean masked loss") {
  EvalExample ex;
  ex.context = {1, 2};
  ex.completions = {{3}, {4, 5, 6}, {7, 8}, {9}};
  const EvalRows r = build_eval_rows(ex, 4);
  // Masked positions: row 0 {1}, row 1 {1, 2, 3}, row 2 {1, 2}, row 3 {1}.
  std::vector<float> losses = {
      100, 2.0f, 100, 100,   // mean 2.0
      100, 1.0f, 1.0f, 1.3f, // mean 1.1 (sum 3.3: the largest sum, so sums would pick another row)
      100, 1.5f, 1.5f, 100,  // mean 1.5
      100, 1.2f, 100, 100,   // mean 1.2
  };
  CHECK(predict_completion(r, losses.data()) == 1);
  // Unmasked positions do not count, however small.
  losses[0] = losses[12] = -1000;
  CHECK(predict_completion(r, losses.data()) == 1);
  losses[13] = 0.5f;
  CHECK(predict_completion(r, losses.data()) == 3);
  // Ties go to the first row.
  losses[1] = 0.5f;
  CHECK(predict_completion(r, losses.data()) == 0);
}
