// The CUDA trainer's speed switches (the table is llmc/cuda/speed_switches.def): settings that change
// how fast a step runs, not what it computes beyond the rounding the contract's bars allow. Plain
// C++, so that the unit tests and the host code can read them.
#pragma once
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace llmc {

// Where the fc layers' GELU is computed (LLMC_GELU). kMixed, the default: the forward pass runs the
// GELU kernel on the stored bf16 pre-activation, which is exactly what a recompute in the backward
// pass reproduces (so -r 0, 1 and 2 give the same gradients), and the backward pass folds gelu' into
// the input-gradient GEMM (cuBLASLt's DGELU epilogue). kKernels: no GELU epilogue at all.
// kEpilogues: the forward pass too uses cuBLASLt's GELU_AUX_BIAS epilogue (one pass less), whose
// output comes from the fp32 pre-activation, which a recompute cannot reproduce: it needs -r 0.
enum class GeluPath { kMixed, kKernels, kEpilogues };

// cuDNN's attention backward graph (LLMC_CUDNN_BACKWARD). kDefault: dQ accumulated in fp32 across
// key blocks, in whatever order the blocks finish. kDeterministic: dQ = dS K as its own product,
// which cuDNN computes with a dS workspace of B*NH*T*T bf16 values, the same bits on every run.
enum class CudnnBackward { kDefault, kDeterministic };

// How each GEMM shape's cuBLASLt algorithm is chosen (LLMC_GEMM_SEARCH; llmc/cuda/gemm_search.cuh).
// kTimed, the default: a start-up tuning pass (one forward and backward micro-step,
// Backend::tune_kernels) times up to kGemmSearchCandidates of the heuristic's choices per shape and
// keeps the fastest; rank 0's table goes to every rank and into the checkpoints, so that a resumed
// run runs the same algorithms. kHeuristic: the heuristic's first choice, no tuning pass.
enum class GemmSearch { kTimed, kHeuristic };

// How a training micro-step is launched (LLMC_CUDA_GRAPHS; llmc/cuda/micro_step_graphs.cuh). kOff,
// the default: kernel by kernel from the host. kOn: its forward pass, classifier and backward pass
// through the layers as one CUDA graph, captured the first time a micro-step of its shape runs
// (after the tuning pass) and launched once per micro-step after that; the same kernels on the same
// buffers, so the same results.
enum class CudaGraphs { kOff, kOn };

// With --fp8 1, where the residual gradient's E5M2 copy is written, the output gradient that the
// attention and fc projections' FP8 input-gradient GEMMs read (LLMC_FP8_RESIDUAL_CAST). kKernel, the
// default: a cast kernel of its own reads the residual gradient after the LayerNorm backward wrote
// it. kLayerNorm: that LayerNorm backward (ln2's, and the next layer's ln1 or lnf's) writes the copy
// of each vector it stores, and records its amax, as the forward LayerNorms do for their outputs:
// the same bytes and the same amax, one pass over the residual gradient less. Without --fp8 1 it
// changes nothing.
enum class Fp8ResidualCast { kKernel, kLayerNorm };

// With --fp8 1, whether the forward FP8 GEMMs use cuBLASLt's fast accumulation
// (LLMC_FP8_FAST_ACCUM; CUBLASLT_MATMUL_DESC_FAST_ACCUM). kOff, the default: cuBLASLt promotes the
// tensor cores' partial sums to fp32 every so often. kForward: the forward GEMMs do not (faster, a
// little less precise: Transformer Engine's default for the forward pass); the input-gradient GEMMs,
// whose E5M2 operands carry less precision already, keep the promotion. The emulated cuBLASLt
// accumulates in fp32 either way. Without --fp8 1 it changes nothing.
enum class Fp8FastAccum { kOff, kForward };

// With --fp8 1, where dqkv's E5M2 copy is written, the output gradient the qkv layer's FP8
// input-gradient GEMM reads (LLMC_FP8_DQKV_CAST). kKernel, the default: a cast kernel of its own
// reads dqkv after cuDNN (or the fallback attention) wrote it. kBiasGrad: the qkv bias gradient's
// first kernel, which reads all of dqkv anyway, writes the copy of each vector it reads and records
// its amax. The same bytes and amax. Without --fp8 1 it changes nothing.
enum class Fp8DqkvCast { kKernel, kBiasGrad };

// With --fp8 1, where the fc layer's bias gradient (the column sums of its output gradient, the GELU
// backward's output) is summed (LLMC_FP8_FC_BIAS_GRAD). kKernels, the default: by the bias-gradient
// kernels reading that gradient again, after the GELU backward kernel wrote it. kGeluBackward: the GELU backward
// runs inside the bias-gradient kernels, which sum each vector it writes (gelu_backward_bias_grad,
// llmc/cuda/matmul.cuh): one pass over B*T*4C less a layer, the same bits. Without --fp8 1 (where
// the GELU backward is cuBLASLt's DGELU epilogue by default) it changes nothing.
enum class Fp8FcBiasGrad { kKernels, kGeluBackward };

// With --fp8 1, whether the LM head (the classifier's logits GEMM and its input-gradient GEMM, the
// largest of the step) runs in FP8 too (LLMC_FP8_LM_HEAD; llmc/cuda/fp8_layout.h, fp8_linears).
// kOff, the default: the four layer GEMMs only, the LM head in floatX. kOn: lnf's E4M3 copy, written
// by the final LayerNorm forward, times wte's E4M3 copy gives the logits; the fused classifier writes
// d(logits)' E5M2 copy as it writes the gradient, which the input-gradient GEMM reads with wte's
// transposed copy; wte's gradient stays a floatX GEMM. Three more scaled tensors (so a checkpoint's
// scaling state is of one setting), and memory for lnf's copy (B*T*C bytes) and for the chunk's
// d(logits) copy in the operand buffer (chunk*Vp bytes where that is more than B*T*4C). Unlike the
// other FP8 switches it changes the numerics: the logits carry FP8's rounding.
enum class Fp8LmHead { kOff, kOn };

// With --fp8 1, where the fc layer's GELU is computed (LLMC_FP8_GELU). kKernel, the default: the fc
// FP8 GEMM writes the pre-activation, and the GELU kernel reads it and writes the bf16 output (kept
// for fcproj's weight gradient) and its E4M3 copy (fcproj's operand). kEpilogue: the fc FP8 GEMM's
// GELU_AUX_BIAS epilogue writes the pre-activation (bf16 aux) and the E4M3 copy of the GELU (an E4M3
// D, cuBLASLt's D scale and amax_D; llmc/cuda/matmul.cuh, matmul_forward_fp8_gelu), and the
// backward's GELU kernel, which reads the pre-activation anyway, writes the bf16 output before the
// weight gradient reads it (MatmulBackward::inp_by_gelu_backward): the GELU forward kernel goes,
// and the output is kept one layer at a time, as at -r 1. It changes the numerics: the E4M3 copy is
// of the GELU of the fp32 pre-activation in cuBLASLt's form. Without --fp8 1 it changes nothing.
enum class Fp8Gelu { kKernel, kEpilogue };

// With --fp8 1, where each weight's amax, which its E4M3 scale is made from before its casts once
// per optimizer step, comes from (LLMC_FP8_WEIGHT_AMAX). kCast, the default: a pass of its own over
// each weight (fp8_amax_kernel, llmc/cuda/fp8.cuh), a launch a weight. kAdamW: the multi-tensor
// AdamW records it as it writes the bf16 weights (Fp8WeightAmaxSink, llmc/cuda/adamw.cuh), which it does
// where its one launch updates every weight whole: on a rank that owns every parameter (one rank, or
// -z 0). After set_parameters or a ZeRO-1 all-gather, the pass runs as with kCast. The same values, so the same amax and the same bits. Without
// --fp8 1 it changes nothing.
enum class Fp8WeightAmax { kCast, kAdamW };

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

// Every switch at the same value.
bool operator==(const SpeedSwitches& a, const SpeedSwitches& b);

// Every switch from its environment variable (unset or empty: the default); throws
// std::runtime_error naming the variable and its values for any other text. A retired variable
// that is set gets one line on `notices` saying it no longer exists and what runs instead.
SpeedSwitches speed_switches_from_env(std::FILE* notices = stderr);
// The most recompute (-r) the switches allow: 0 with LLMC_GELU=epilogues, else 2.
int max_recompute(const SpeedSwitches& s);
// "LLMC_GELU=mixed LLMC_...=..." for every row, in the table's order.
std::string speed_switches_summary(const SpeedSwitches& s);

}  // namespace llmc
