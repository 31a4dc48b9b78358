#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "llmc/gpt2.h"
#include "llmc/io/model_file.h"
#include "llmc/rng.h"
#include "tests/unit/test_support.h"

using namespace llmc;
using namespace test_support;

namespace {

GPT2Config small_config() { return two_layer_config(64, 32, 1000, 1024); }

void set_header_int(std::string& bytes, int index, int32_t value) {
  std::memcpy(bytes.data() + 4 * index, &value, 4);
}

// The message of the error load_model throws for `path`, or "" if it loads.
std::string load_error(const std::string& path) {
  return error_message([&] { load_model(path); });
}

uint16_t bf16_of_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return float_to_bf16(f);
}

}  // namespace

TEST_CASE("gpt2: named and custom descriptors") {
  check_shape(config_from_descriptor("d12"), 12, 12, 768, 1024, 50257, 50304);
  GPT2Config d48 = config_from_descriptor("d48");
  CHECK(d48.num_layers == 48);
  CHECK(d48.num_heads == 25);
  CHECK(d48.channels == 1600);
  CHECK(config_from_descriptor("d24").channels == 1024);
  CHECK(config_from_descriptor("d36").num_heads == 20);
  CHECK(config_from_descriptor("d6").channels == 384);
  GPT2Config custom = config_from_descriptor("L4H4C256T256");
  CHECK(custom.num_layers == 4);
  CHECK(custom.num_heads == 4);
  CHECK(custom.channels == 256);
  CHECK(custom.max_seq_len == 256);
  CHECK(config_from_descriptor("L3H3C96").max_seq_len == 1024);
  CHECK(is_descriptor("d12"));
  CHECK(is_descriptor("L1H1C8"));
  CHECK_FALSE(is_descriptor("model.bin"));
  CHECK_FALSE(is_descriptor("d13"));
  CHECK_FALSE(is_descriptor("L4H4"));
  CHECK_FALSE(is_descriptor("L4H4C256X"));
  CHECK_THROWS_AS(config_from_descriptor("d13"), std::invalid_argument);
  CHECK_THROWS_AS(config_from_descriptor("L4H3C256"), std::invalid_argument);  // 256 % 3 != 0
  CHECK_THROWS_AS(config_from_descriptor("L0H1C8"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(config_from_descriptor("gpt"), doctest::Contains("'gpt'"), std::invalid_argument);
}

TEST_CASE("gpt2: parameter layout") {
  // llm.c's GPT-2 124M with the vocabulary padded to 50304.
  CHECK(num_parameters(config_from_descriptor("d12")) == 124475904);
  GPT2Config c = small_config();
  auto layout = param_layout(c);
  const size_t L = 2, C = 64;
  const size_t expected[kNumParamTensors] = {1024 * C, 32 * C, L * C, L * C, L * 3 * C * C, L * 3 * C,
                                             L * C * C, L * C, L * C, L * C, L * 4 * C * C, L * 4 * C,
                                             L * 4 * C * C, L * C, C, C};
  size_t offset = 0;
  for (int i = 0; i < kNumParamTensors; ++i) {
    CHECK(layout[i].offset == offset);
    CHECK(layout[i].numel == expected[i]);
    offset += expected[i];
  }
  CHECK(num_parameters(c) == offset);
  CHECK(std::string(layout[kQkvw].name) == "qkvw");
  CHECK(std::string(layout[kLnfb].name) == "lnfb");
  for (int i = 0; i < kNumParamTensors; ++i) {
    const bool decayed = i == kWte || i == kWpe || i == kQkvw || i == kAttprojw || i == kFcw || i == kFcprojw;
    CHECK(layout[i].weight_decay == decayed);
  }
}

TEST_CASE("gpt2: per-layer slices") {
  GPT2Config c = small_config();
  const auto layout = param_layout(c);
  const size_t C = 64;
  // The 12 per-layer tensors, each 2 slices of the sizes worked out by hand; layer 1's slice starts
  // one slice after layer 0's.
  const size_t slice[kNumParamTensors] = {0, 0, C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C,
                                          0, 0};
  for (int i = 0; i < kNumParamTensors; ++i) {
    CAPTURE(layout[i].name);
    const bool per_layer = i >= kLn1w && i <= kFcprojb;
    CHECK(layout[i].per_layer == per_layer);
    CHECK(layout[i].at(0) == layout[i].offset);
    if (per_layer) {
      CHECK(layout[i].shape.numel() == slice[i]);
      CHECK(layout[i].at(1) == layout[i].offset + slice[i]);
    } else {
      CHECK(layout[i].shape.numel() == layout[i].numel);
      CHECK(layout[i].at(1) == layout[i].offset);  // shared by every layer
    }
  }
}

TEST_CASE("gpt2: batch checks name the bad position and token") {
  GPT2Config c = small_config();
  std::vector<int> ok(2 * 4, 5), bad = ok;
  CHECK_NOTHROW(check_batch(c, ok.data(), ok.data(), 2, 4));
  CHECK_NOTHROW(check_batch(c, ok.data(), nullptr, 2, 4));
  bad[6] = c.vocab_size;
  CHECK_THROWS_WITH_AS(check_batch(c, bad.data(), ok.data(), 2, 4),
                       doctest::Contains("input token 1000 at position 6"), std::invalid_argument);
  bad[6] = -1;
  CHECK_THROWS_WITH_AS(check_batch(c, ok.data(), bad.data(), 2, 4),
                       doctest::Contains("target token -1 at position 6"), std::invalid_argument);
  CHECK_THROWS_AS(check_batch(c, ok.data(), ok.data(), 0, 4), std::invalid_argument);
  CHECK_THROWS_AS(check_batch(c, ok.data(), ok.data(), 1, c.max_seq_len + 1), std::invalid_argument);
}

TEST_CASE("gpt2: initialisation statistics") {
  GPT2Config c = small_config();
  std::vector<float> p = init_parameters(c, 42);
  auto layout = param_layout(c);
  auto stats = [&](int index, size_t begin, size_t end, double& mean, double& stddev) {
    double s = 0, s2 = 0;
    for (size_t i = begin; i < end; ++i) {
      s += p[layout[index].offset + i];
      s2 += double(p[layout[index].offset + i]) * p[layout[index].offset + i];
    }
    mean = s / double(end - begin);
    stddev = std::sqrt(s2 / double(end - begin) - mean * mean);
  };
  double mean, stddev;
  stats(kWte, 0, size_t(c.vocab_size) * c.channels, mean, stddev);
  CHECK(std::fabs(mean) < 1e-3);
  CHECK(stddev == doctest::Approx(0.02).epsilon(0.02));
  stats(kFcw, 0, layout[kFcw].numel, mean, stddev);
  CHECK(stddev == doctest::Approx(0.02).epsilon(0.02));
  stats(kAttprojw, 0, layout[kAttprojw].numel, mean, stddev);
  CHECK(stddev == doctest::Approx(0.02 / std::sqrt(4.0)).epsilon(0.03));
  stats(kFcprojw, 0, layout[kFcprojw].numel, mean, stddev);
  CHECK(stddev == doctest::Approx(0.01).epsilon(0.03));
  for (size_t i = size_t(c.vocab_size) * c.channels; i < layout[kWte].numel; ++i)
    REQUIRE(p[layout[kWte].offset + i] == 0.0f);
  for (int index : {kQkvb, kAttprojb, kFcb, kFcprojb, kLn1b, kLn2b, kLnfb})
    for (size_t i = 0; i < layout[index].numel; ++i) REQUIRE(p[layout[index].offset + i] == 0.0f);
  for (int index : {kLn1w, kLn2w, kLnfw})
    for (size_t i = 0; i < layout[index].numel; ++i) REQUIRE(p[layout[index].offset + i] == 1.0f);
  CHECK(init_parameters(c, 42) == p);
  CHECK(init_parameters(c, 43) != p);
}

TEST_CASE("gpt2: initialisation draws the normal tensors in checkpoint order, wte's real rows only") {
  const GPT2Config c = small_config();
  const auto layout = param_layout(c);
  const std::vector<float> p = init_parameters(c, 7);
  Rng rng(7);
  size_t mismatches = 0;
  const auto expect = [&](int index, size_t n, float stddev) {
    for (size_t i = 0; i < n; ++i) mismatches += p[layout[index].offset + i] != stddev * rng.normal();
  };
  const float residual_std = 0.02f / std::sqrt(2.0f * c.num_layers);
  expect(kWte, size_t(c.vocab_size) * c.channels, 0.02f);
  expect(kWpe, layout[kWpe].numel, 0.02f);
  expect(kQkvw, layout[kQkvw].numel, 0.02f);
  expect(kAttprojw, layout[kAttprojw].numel, residual_std);
  expect(kFcw, layout[kFcw].numel, 0.02f);
  expect(kFcprojw, layout[kFcprojw].numel, residual_std);
  CHECK(mismatches == 0);
}

TEST_CASE("gpt2: bf16 rounds to nearest even") {
  CHECK(float_to_bf16(1.0f) == 0x3F80);
  CHECK(float_to_bf16(-2.0f) == 0xC000);
  CHECK(bf16_of_bits(0x3F808000u) == 0x3F80);  // halfway, kept part even: down
  CHECK(bf16_of_bits(0x3F818000u) == 0x3F82);  // halfway, kept part odd: up
  CHECK(bf16_of_bits(0x3F808001u) == 0x3F81);  // just above halfway: up
  CHECK(bf16_of_bits(0x3F807FFFu) == 0x3F80);  // just below halfway: down
  CHECK(bf16_of_bits(0x7F7FFFFFu) == 0x7F80);  // largest float rounds to +inf
  CHECK(float_to_bf16(INFINITY) == 0x7F80);
  CHECK(float_to_bf16(-INFINITY) == 0xFF80);
  CHECK(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  CHECK(std::isnan(bf16_to_float(bf16_of_bits(0x7F800001u))));  // payload only in the dropped bits
  CHECK(bf16_to_float(0x3F80) == 1.0f);
  CHECK(bf16_to_float(0xC049) == -3.140625f);
  CHECK(bf16_to_float(float_to_bf16(0.1f)) == doctest::Approx(0.1f).epsilon(1.0 / 256));
}

TEST_CASE("gpt2: model file round trip, fp32 and bf16") {
  GPT2Config c = small_config();
  std::vector<float> p = init_parameters(c, 7);
  p[5] = 0.123456789f;
  const std::string path3 = temp_path("v3.bin"), path5 = temp_path("v5.bin");
  save_model(path3, c, p.data(), kModelVersionFp32);
  CHECK(std::filesystem::file_size(path3) == 1024 + 4 * num_parameters(c));
  ModelFile m3 = load_model(path3);
  CHECK(m3.version == 3);
  check_shape(m3.config, 2, 2, 64, 32, 1000, 1024);
  CHECK(m3.params == p);
  const std::string bytes = read_bytes(path3);
  int32_t header[8];
  std::memcpy(header, bytes.data(), sizeof(header));
  CHECK(header[0] == 20240326);
  CHECK(header[3] == 1000);
  CHECK(header[7] == 1024);

  save_model(path5, c, p.data(), kModelVersionBf16);
  CHECK(std::filesystem::file_size(path5) == 1024 + 2 * num_parameters(c));
  ModelFile m5 = load_model(path5);
  CHECK(m5.version == 5);
  REQUIRE(m5.params.size() == p.size());
  for (size_t i = 0; i < p.size(); ++i) REQUIRE(m5.params[i] == bf16_to_float(float_to_bf16(p[i])));
  CHECK(m5.params[5] != p[5]);  // really rounded
  CHECK(!std::filesystem::exists(path5 + ".tmp"));
  std::remove(path3.c_str());
  std::remove(path5.c_str());
}

TEST_CASE("gpt2: bad model files are rejected with the file named") {
  GPT2Config c = small_config();
  std::vector<float> p = init_parameters(c, 1);
  const std::string good = temp_path("good.bin"), bad = temp_path("bad.bin");
  save_model(good, c, p.data(), kModelVersionFp32);
  const std::string bytes = read_bytes(good);

  CHECK(load_error(temp_path("missing.bin")).find("missing.bin") != std::string::npos);

  std::string b = bytes;
  set_header_int(b, 0, 20240520);
  write_bytes(bad, b);
  CHECK(load_error(bad).find("magic") != std::string::npos);
  CHECK(load_error(bad).find(bad) != std::string::npos);

  b = bytes;
  set_header_int(b, 1, 4);
  write_bytes(bad, b);
  CHECK(load_error(bad).find("version 4") != std::string::npos);

  b = bytes;
  b.pop_back();
  write_bytes(bad, b);
  CHECK(load_error(bad).find("bytes") != std::string::npos);

  b = bytes;
  b.push_back('\0');
  write_bytes(bad, b);
  CHECK(load_error(bad).find("bytes") != std::string::npos);

  b = bytes;
  set_header_int(b, 1, 5);  // an fp32 body under a bf16 header is twice too long
  write_bytes(bad, b);
  CHECK(load_error(bad).find("bytes") != std::string::npos);

  b.assign(bytes.begin(), bytes.begin() + 100);
  write_bytes(bad, b);
  CHECK(load_error(bad).find("header") != std::string::npos);

  const std::pair<int, int32_t> absurd[] = {{2, 0}, {3, -5}, {4, 1000000000}, {5, 3}, {6, 0}, {7, 999}};
  for (auto [index, value] : absurd) {
    b = bytes;
    set_header_int(b, index, value);
    write_bytes(bad, b);
    CAPTURE(index);
    CHECK(load_error(bad).find("bad shape") != std::string::npos);
  }
  CHECK(load_error(good).empty());
  std::remove(good.c_str());
  std::remove(bad.c_str());
}
