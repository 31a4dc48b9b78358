// test_gpt2cu's command line (test_gpt2.cu's usage comment): the model, the batch, the steps and
// the seed, --quick and --probe. A bad flag or value throws std::invalid_argument naming it.
#pragma once
#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>

struct Args {
  std::string config = "L2H4C256T64";
  std::string model;
  int B = 4;
  int T = 64;
  int steps = 10;
  uint64_t seed = 42;
  bool quick = false;
  bool probe = false;
};

inline int parse_int(const std::string& flag, const std::string& value, int lo, int hi) {
  size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || value.empty() || v < lo || v > hi)
    throw std::invalid_argument(fmt::format("{}: wants an integer in [{}, {}], got '{}'", flag, lo, hi, value));
  return v;
}

inline Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--quick" || flag == "--probe") {
      (flag == "--quick" ? a.quick : a.probe) = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument(fmt::format("{}: missing value (or unknown flag)", flag));
    const std::string value = argv[++i];
    if (flag == "--config") a.config = value;
    else if (flag == "--model") a.model = value;
    else if (flag == "--B") a.B = parse_int(flag, value, 1, 1 << 16);
    else if (flag == "--T") a.T = parse_int(flag, value, 1, 1 << 16);
    else if (flag == "--steps") a.steps = parse_int(flag, value, 0, 1000);
    else if (flag == "--seed") a.seed = uint64_t(parse_int(flag, value, 0, 1 << 30));
    else throw std::invalid_argument(fmt::format("unknown flag '{}'", flag));
  }
  return a;
}
