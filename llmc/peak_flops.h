// The dense peak FLOP/s of a GPU, which MFU (llmc/train/mfu.h) is counted against: what the CUDA
// backend reports for its device, from a table of NVIDIA's data sheets or LLMC_PEAK_TFLOPS.
#pragma once
#include <optional>
#include <string>

namespace llmc {

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
