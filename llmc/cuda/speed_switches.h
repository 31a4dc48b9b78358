// The CUDA trainer's speed switches (the table is llmc/cuda/speed_switches.def): settings that change
// how fast a step runs, not what it computes beyond the rounding the contract's bars allow. Plain
// C++, so that the unit tests and the host code can read them.
#pragma once
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace llmc {

// One enum per row of llmc/cuda/speed_switches.def, its enumerators in the order of the row's values
// (the default first). What each value does, why the switch stays and what a GPU measured:
// docs/cuda-trainer.md, "Speed switches".
enum class GeluPath { kMixed, kKernels, kEpilogues };      // LLMC_GELU; kEpilogues needs -r 0
enum class GemmSearch { kTimed, kHeuristic };              // LLMC_GEMM_SEARCH (llmc/cuda/gemm_search.cuh)
enum class CudnnBackward { kDefault, kDeterministic };     // LLMC_CUDNN_BACKWARD
enum class CudaGraphs { kOff, kOn };                       // LLMC_CUDA_GRAPHS (llmc/cuda/micro_step_graphs.cuh)
// With --fp8 1 only (without it they change nothing):
enum class Fp8ResidualCast { kKernel, kLayerNorm };        // LLMC_FP8_RESIDUAL_CAST
enum class Fp8FastAccum { kOff, kForward };                // LLMC_FP8_FAST_ACCUM
enum class Fp8DqkvCast { kKernel, kBiasGrad };             // LLMC_FP8_DQKV_CAST
enum class Fp8FcBiasGrad { kKernels, kGeluBackward };      // LLMC_FP8_FC_BIAS_GRAD (gelu_backward_bias_grad)
enum class Fp8LmHead { kOff, kOn };                        // LLMC_FP8_LM_HEAD (fp8_linears, fp8_layout.h)
enum class Fp8Gelu { kKernel, kEpilogue };                 // LLMC_FP8_GELU (matmul_forward_fp8_gelu)
enum class Fp8WeightAmax { kCast, kAdamW };                // LLMC_FP8_WEIGHT_AMAX (Fp8WeightAmaxSink, adamw.cuh)

// One field per row of the table, each at its default (the first value, enumerator 0).
struct SpeedSwitches {
#define LLMC_SPEED_SWITCH(type, field, variable, values, what) type field{};
#include "llmc/cuda/speed_switches.def"
#undef LLMC_SPEED_SWITCH
};

// A row of the table: the variable, its values (the default first) and what it chooses.
struct SpeedSwitchRow {
  const char* variable;
  std::vector<std::string> values;
  const char* what;
};
const std::vector<SpeedSwitchRow>& speed_switch_rows();

// A switch a GPU run settled and the trainer no longer has: its variable and the one path left.
struct RetiredSpeedSwitch {
  const char* variable;
  const char* now;
};
const std::vector<RetiredSpeedSwitch>& retired_speed_switches();

// The value of row `row` in `s`, as an index into its values; and setting it.
int speed_switch_value(const SpeedSwitches& s, size_t row);
void set_speed_switch(SpeedSwitches& s, size_t row, int value);
// Row `row` set by its value's name; throws std::runtime_error naming the variable and its values
// when `value` is none of them.
void set_speed_switch(SpeedSwitches& s, size_t row, const std::string& value);

// Every switch from its environment variable (unset or empty: the default); throws
// std::runtime_error naming the variable and its values for any other text. A retired variable
// that is set gets one line on `notices` saying it no longer exists and what runs instead.
SpeedSwitches speed_switches_from_env(std::FILE* notices = stderr);
// The most recompute (-r) the switches allow: 0 with LLMC_GELU=epilogues, else 2.
int max_recompute(const SpeedSwitches& s);
// "LLMC_GELU=mixed LLMC_...=..." for every row, in the table's order.
std::string speed_switches_summary(const SpeedSwitches& s);

}  // namespace llmc
