// A family's versions as one table: each row says what the version is, how to launch it, how to
// check it and what it costs. Selection by name, `all`, --help, the checks and the timings all
// come from that table, so a new version is one row (dev/cuda/README.md, "Add a version").
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "dev/cuda/common.cuh"

namespace bench {

// What one launch must move at least (each input read once, each output written once) and the
// floating-point operations it does (0 for the memory-bound kernels): the GB/s and TFLOP/s columns.
struct Cost {
  double bytes;
  double flops = 0;
};

template <class Data>
struct Version {
  std::string name;
  std::string what;
  // Threads per block a --sweep times, the version's own first; empty: no block-size parameter.
  std::vector<int> blocks;
  // Launches the version on d with `block` threads per block (0: its own): what is timed. Unset
  // (with cost): a version that is a check alone, with nothing to time.
  std::function<void(Data& d, int block)> launch;
  // Runs the version on d (through `launch` or, where the trainer calls it another way, that way)
  // and checks it against the CPU reference: PASS/FAIL lines starting with `tag`; true if all pass.
  std::function<bool(Data& d, const Version& v, const std::string& tag, int block)> check;
  // From d's shape.
  std::function<Cost(const Data& d)> cost;
  // Whether the version exists on d (a build or a shape it does not support; its check may be what
  // finds out, and says so): if not, it is not timed. Unset: always.
  std::function<bool(const Data& d)> runs_on = nullptr;
  // Untimed launches, then timed ones (each --reps where given).
  int warmup = 10, reps = 100;
};

template <class Data>
std::vector<VersionInfo> infos(const std::vector<Version<Data>>& table) {
  std::vector<VersionInfo> out;
  for (const Version<Data>& v : table) out.push_back({v.name, v.what, v.blocks});
  return out;
}

inline std::string with_block(const std::string& name, int block) {
  return block == 0 ? name : fmt::format("{} block={}", name, block);
}

// A version's lines are named `tag` + its name (and block size) + `suffix`: the family and shape
// before the version, or after it where a family names its lines version first.
template <class Data>
bool check_versions(const Args& a, const std::vector<Version<Data>>& table, Data& d, const std::string& tag,
                    const std::string& suffix = "") {
  bool ok = true;
  for (const Version<Data>& v : table) {
    if (!selected(a, v.name)) continue;
    for (int block : blocks_to_run(a, {v.name, v.what, v.blocks}))
      ok &= v.check(d, v, tag + with_block(v.name, block) + suffix, block);
  }
  return ok;
}

// One report line per selected version (at each block size asked for) that runs on d.
template <class Data>
void time_versions(const Args& a, const std::vector<Version<Data>>& table, Data& d, const std::string& tag,
                   const std::string& suffix = "") {
  for (const Version<Data>& v : table) {
    if (!selected(a, v.name) || !v.launch || (v.runs_on && !v.runs_on(d))) continue;
    const Cost c = v.cost(d);
    for (int block : blocks_to_run(a, {v.name, v.what, v.blocks}))
      report(tag + with_block(v.name, block) + suffix, time_ms([&] { v.launch(d, block); }, v.warmup, v.reps),
             c.bytes, c.flops);
  }
}

// Checks every selected version (at each block size asked for) on d; then, when `timed` and every
// check passed, times them, one report line each. `tag` names the family and the shape.
template <class Data>
bool run_versions(const Args& a, const std::vector<Version<Data>>& table, Data& d, const std::string& tag, bool timed,
                  const std::string& suffix = "") {
  const bool ok = check_versions(a, table, d, tag, suffix);
  if (timed && !a.check_only && ok) time_versions(a, table, d, tag, suffix);
  return ok;
}

}  // namespace bench
