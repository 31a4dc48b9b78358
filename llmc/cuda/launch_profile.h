// LLMC_PROFILE=on: the CUDA trainer times every kernel launch, cuBLASLt GEMM and cuDNN call with a
// pair of CUDA events (llmc/cuda/launch_profiler.cuh) and prints, at the end of the run, a table of
// where a training step's GPU time goes: one `profile:` line per name. Not a speed switch: the
// events and the per-step wait slow the run, so it is its own variable. The CUDA-free parts are
// here (plain C++: the unit tests and the host library use them): the variable, the kernel names,
// the table.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace llmc {

// Training steps left out of the table at the start: the first step chooses cuBLASLt's algorithms
// and warms the caches.
constexpr int kProfileWarmupSteps = 1;
// Event pairs made at start-up; when they are all recorded before a step ends, the profiler waits
// for the GPU, reads them and starts over (d12 makes about 300 launches per micro-batch).
constexpr int kProfileEventPairs = 4096;

// LLMC_PROFILE: "on" profiles; unset, empty or "off" does not; throws std::runtime_error naming
// the variable for anything else.
bool profile_from_env();

// A kernel's name from the __PRETTY_FUNCTION__ of a function template whose non-type parameter
// `Kernel` is that kernel, e.g. "... [with auto Kernel = llmc::layernorm_backward_kernel<__nv_bfloat16>]"
// (g++) or "... [Kernel = &llmc::f]" (clang): the kernel's name without its namespaces or '&', its
// template arguments kept ("layernorm_backward_kernel<__nv_bfloat16>"). The signature itself when it
// names no Kernel. Inline: the dev/cuda benchmarks include it without the host library.
inline std::string kernel_name_from_signature(std::string_view signature) {
  constexpr std::string_view kKey = "Kernel = ";
  const size_t at = signature.find(kKey);
  if (at == std::string_view::npos) return std::string(signature);
  std::string_view name = signature.substr(at + kKey.size());
  // The parameter's value runs to the signature's closing ']' (g++ adds "; ..." for other parameters).
  size_t end = name.find(';');
  if (end == std::string_view::npos) end = name.rfind(']');
  name = name.substr(0, end);
  while (!name.empty() && (name.front() == '&' || name.front() == '(' || name.front() == ' ')) name.remove_prefix(1);
  while (!name.empty() && (name.back() == ')' || name.back() == ' ')) name.remove_suffix(1);
  // Drop the namespaces of the kernel itself (those before its template arguments).
  const size_t args = name.find('<');
  const size_t scope = name.substr(0, args).rfind("::");
  if (scope != std::string_view::npos) name.remove_prefix(scope + 2);
  return std::string(name);
}

// What one name took over the profiled steps: its calls and milliseconds in all.
struct ProfileRow {
  std::string name;
  long long calls = 0;
  double ms = 0.0;
};

// The table, every line starting with "profile: ": a summary line (steps, launches and ms per step,
// the warm-up left out), a header, then one line per name, the most time first: ms per step, its
// share of the total, calls per step, the name. With no steps, one line that says so.
std::vector<std::string> profile_table(std::vector<ProfileRow> rows, int steps, int warmup_steps);

}  // namespace llmc
