// Model FLOPs utilisation (MFU): the FLOPs a step's tokens need, counted from the model's shape
// (not from the kernels that ran, so recomputation earns nothing), per second, over the GPU's
// dense peak. The count is llm.c's and the PaLM paper's (appendix B): per token, 6N for the
// matmuls of the forward (2N) and backward (4N) pass over all N parameters, plus 6LCT for the
// attention scores and their use (QK^T and AV, 2·2·L·C·T forward, twice that backward, halved by
// the causal mask). The peak is what the CUDA backend reports for its device, from a table of
// NVIDIA's data sheets or LLMC_PEAK_TFLOPS.
#pragma once
#include <optional>
#include <string>

#include "llmc/gpt2.h"

namespace llmc {

// 6N + 6·L·C·T for sequences of seq_len tokens.
double model_flops_per_token(const GPT2Config& config, int seq_len);

// Percent of `peak_flops_per_second` that `tokens_per_second` tokens of `flops_per_token` each are.
double mfu_percent(double flops_per_token, double tokens_per_second, double peak_flops_per_second);

// The dense (no sparsity) bf16 tensor-core peak in TFLOP/s of a GPU by its exact CUDA device name
// (cudaDeviceProp::name, as nvidia-smi prints it), from NVIDIA's data sheets; nothing for a GPU
// the table does not know, rather than a guess from a similar name.
std::optional<double> dense_bf16_peak_tflops(const std::string& device_name);

// What MFU is counted against: the peak in FLOP/s (0: none, then no MFU is shown) and where it
// comes from, or why there is none.
struct PeakFlops {
  double flops_per_second = 0.0;
  std::string source;
};
// For a GPU named `device_name` running a bf16 (else fp32) build: `override_tflops` (the value of
// LLMC_PEAK_TFLOPS, null when unset) when given, else the table's dense bf16 peak (bf16 builds;
// an fp32 build runs no bf16 tensor-core math). Throws std::runtime_error naming LLMC_PEAK_TFLOPS
// when its value is not a positive number.
PeakFlops device_peak_flops(const std::string& device_name, bool bf16, const char* override_tflops);

}  // namespace llmc
