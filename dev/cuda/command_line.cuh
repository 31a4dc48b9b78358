// The command line every dev/cuda benchmark shares:
//   [VERSION|all] [--check] [--small] [SHAPE FLAGS] [--block N[,N...] | --sweep] [--reps N]
// A family declares its shape flags (name, meaning, default, required divisor) and its versions
// (name, meaning, the block sizes a sweep times); from those come the parsing, the range checks,
// the errors and --help. A bad value is an error naming the flag and what was wrong (exit 1).
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <cstdlib>
#include <string>
#include <vector>

namespace bench {

// One dimension of a family's timed shape, as `-N 8192`: its flag, what it counts, its default
// (GPT-2 124M's), and a number it must be a multiple of (16-byte vectors, head sizes).
struct Dim {
  std::string flag;
  std::string meaning;
  long long value;
  long long multiple_of = 1;
};

// What the command line needs to know of a version: its name, one line on what it is, and the
// threads per block a sweep times (empty: its launch has no block-size parameter; 0: the launch
// the trainer makes, which picks its own).
struct VersionInfo {
  std::string name;
  std::string what;
  std::vector<int> blocks = {};
};

struct Args {
  std::vector<std::string> versions;  // the versions named on the command line; none (or "all"): every one
  bool check_only = false;
  // Only the built-in small shapes (odd widths, row tails, idle lanes), nothing timed: what the
  // emulated GPU runs in make test (docs/cuda-emulator.md).
  bool small = false;
  std::vector<Dim> shape;       // the family's dimensions, with the command line's values
  bool shape_given = false;     // a shape flag was given: that shape alone, not the small ones too
  std::vector<int> blocks;      // --block: these threads-per-block for every version that has one
  bool sweep = false;           // --sweep: each version at each of its own block sizes
  int reps = 0;                 // --reps: timed repetitions (0: each timing's own, 100 mostly)
  // The value of a shape flag; the flag must be one the family declared.
  long long dim(const std::string& flag) const {
    for (const Dim& d : shape)
      if (d.flag == flag) return d.value;
    throw std::logic_error("no shape flag " + flag);
  }
};

inline void print_usage(const char* program, const std::vector<Dim>& shape, const std::vector<VersionInfo>& versions) {
  fmt::print("usage: {} [VERSION...|all] [--check] [--small]", program);
  for (const Dim& d : shape) fmt::print(" [{} N]", d.flag);
  fmt::print(" [--block N[,N...] | --sweep] [--reps N]\n\n");
  fmt::print("Checks each selected version against the CPU reference at the shape below and at small\n"
             "shapes (given shape flags: that shape alone), then times it at the shape below (median of\n"
             "--reps runs, L2 flushed before each).\n"
             "  --check     checks only, no timing      --small   only the small shapes, no timing\n"
             "  --block N   threads per block for the versions that take one (a list: each is timed)\n"
             "  --sweep     each version at each of its block sizes below\n"
             "  --reps N    timed repetitions (default 100; attention 20)\n\nshape:\n");
  for (const Dim& d : shape)
    fmt::print("  {:<6} {} (default {}{})\n", d.flag, d.meaning, d.value,
               d.multiple_of > 1 ? fmt::format(", a multiple of {}", d.multiple_of) : "");
  fmt::print("\nversions:\n");
  for (const VersionInfo& v : versions) {
    std::string blocks;
    for (int b : v.blocks) blocks += (blocks.empty() ? " [blocks " : ",") + (b == 0 ? "own" : std::to_string(b));
    fmt::print("  {:<24} {}{}\n", v.name, v.what, blocks.empty() ? "" : blocks + "]");
  }
}

[[noreturn]] inline void usage_error(const char* program, const std::string& what) {
  fmt::print(stderr, "error: {} (see {} --help)\n", what, program);
  std::exit(1);
}

// A whole positive number no larger than `max`, or an error naming the flag.
inline long long parse_count(const char* program, const std::string& flag, const std::string& text, long long max) {
  char* end = nullptr;
  const long long v = text.empty() ? 0 : std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 1 || v > max)
    usage_error(program, fmt::format("{} wants a whole number from 1 to {}, got '{}'", flag, max, text));
  return v;
}

// Threads per block: whole warps, at most 1024 (every GPU since sm_20).
inline std::vector<int> parse_blocks(const char* program, const std::string& text) {
  std::vector<int> blocks;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const int b = int(parse_count(program, "--block", text.substr(start, comma - start), 1024));
    if (b % 32 != 0) usage_error(program, fmt::format("--block {} is not a multiple of 32 (whole warps)", b));
    blocks.push_back(b);
    start = comma + 1;
  }
  return blocks;
}

inline Args parse_args(int argc, char** argv, const std::vector<Dim>& shape, const std::vector<VersionInfo>& versions) {
  Args a;
  a.shape = shape;
  const char* program = argv[0];
  auto value_of = [&](int& i, const std::string& flag) -> std::string {
    if (i + 1 >= argc) usage_error(program, flag + " needs a value");
    return argv[++i];
  };
  bool all = false;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto dim = std::find_if(a.shape.begin(), a.shape.end(), [&](const Dim& d) { return d.flag == s; });
    if (s == "--help" || s == "-h") {
      print_usage(program, shape, versions);
      std::exit(0);
    } else if (s == "--check") {
      a.check_only = true;
    } else if (s == "--small") {
      a.small = true;
    } else if (s == "--sweep") {
      a.sweep = true;
    } else if (s == "--block") {
      a.blocks = parse_blocks(program, value_of(i, s));
    } else if (s == "--reps") {
      a.reps = int(parse_count(program, s, value_of(i, s), 1000000));
    } else if (dim != a.shape.end()) {
      // Kernels index rows and channels with int: every dimension fits one.
      dim->value = parse_count(program, s, value_of(i, s), INT_MAX);
      if (dim->value % dim->multiple_of != 0)
        usage_error(program, fmt::format("{} {} is not a multiple of {} ({})", s, dim->value, dim->multiple_of,
                                         dim->meaning));
      a.shape_given = true;
    } else if (!s.empty() && s[0] == '-') {
      usage_error(program, fmt::format("unknown flag '{}'", s));
    } else if (s != "all") {
      a.versions.push_back(s);
    } else {
      all = true;
    }
  }
  if (a.sweep && !a.blocks.empty()) usage_error(program, "--sweep and --block: give one of them");
  if (a.small && a.shape_given) usage_error(program, "--small runs only the built-in small shapes; drop the shape flags");
  for (const std::string& name : a.versions) {
    const bool known =
        std::any_of(versions.begin(), versions.end(), [&](const VersionInfo& v) { return v.name == name; });
    if (known) continue;
    std::string list;
    for (const VersionInfo& v : versions) list += ", " + v.name;
    usage_error(program, fmt::format("unknown version '{}' (have: all{})", name, list));
  }
  if (all) a.versions.clear();
  return a;
}

inline bool selected(const Args& a, const std::string& version) {
  return a.versions.empty() || std::find(a.versions.begin(), a.versions.end(), version) != a.versions.end();
}

// The block sizes a version is checked and timed at: 0 (its own) when it has none or none was
// asked for; --block's where it has a block size; --sweep: its own list.
inline std::vector<int> blocks_to_run(const Args& a, const VersionInfo& v) {
  if (v.blocks.empty()) return {0};
  if (a.sweep) return v.blocks;
  if (!a.blocks.empty()) return a.blocks;
  return {0};
}

}  // namespace bench
