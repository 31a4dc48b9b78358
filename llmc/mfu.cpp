// MFU (llmc/mfu.h): the FLOP count and the table of GPU peaks.
#include "llmc/mfu.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace llmc {

double model_flops_per_token(const GPT2Config& config, int seq_len) {
  const double N = double(num_parameters(config));
  return 6.0 * N + 6.0 * config.num_layers * double(config.channels) * seq_len;
}

double mfu_percent(double flops_per_token, double tokens_per_second, double peak_flops_per_second) {
  return 100.0 * flops_per_token * tokens_per_second / peak_flops_per_second;
}

std::optional<double> dense_bf16_peak_tflops(const std::string& device_name) {
  // Dense bf16 with fp32 accumulation; the data sheets print twice these "with sparsity".
  struct Entry {
    const char* name;
    double tflops;
  };
  static const Entry kTable[] = {
      {"NVIDIA H100 80GB HBM3", 989.4},  // H100 SXM5
      {"NVIDIA H100 PCIe", 756.5},
      {"NVIDIA H100 NVL", 835.5},
      {"NVIDIA H800", 989.4},
      {"NVIDIA H800 PCIe", 756.5},
      {"NVIDIA H200", 989.4},  // H200 SXM
      {"NVIDIA H200 NVL", 835.5},
      {"NVIDIA GH200 480GB", 989.4},
      {"NVIDIA A100-SXM4-40GB", 312.0},
      {"NVIDIA A100-SXM4-80GB", 312.0},
      {"NVIDIA A100-PCIE-40GB", 312.0},
      {"NVIDIA A100 80GB PCIe", 312.0},
      {"NVIDIA A800-SXM4-80GB", 312.0},
      {"NVIDIA A800 80GB PCIe", 312.0},
      {"NVIDIA L40S", 362.05},
  };
  for (const Entry& e : kTable)
    if (device_name == e.name) return e.tflops;
  return std::nullopt;
}

PeakFlops device_peak_flops(const std::string& device_name, bool bf16, const char* override_tflops) {
  if (override_tflops != nullptr) {
    char* end = nullptr;
    errno = 0;
    const double tflops = std::strtod(override_tflops, &end);
    if (end == override_tflops || *end != '\0' || errno != 0 || !std::isfinite(tflops) || tflops <= 0.0)
      throw std::runtime_error(
          fmt::format("LLMC_PEAK_TFLOPS: '{}' is not a positive number of TFLOP/s (the GPU's dense peak)",
                      override_tflops));
    return {tflops * 1e12, fmt::format("{:g} TFLOP/s from LLMC_PEAK_TFLOPS", tflops)};
  }
  if (!bf16)
    return {0.0, "none: the table holds bf16 peaks and this is the fp32 build (set LLMC_PEAK_TFLOPS)"};
  if (const std::optional<double> tflops = dense_bf16_peak_tflops(device_name))
    return {*tflops * 1e12, fmt::format("{:g} TFLOP/s, the dense bf16 peak of {}", *tflops, device_name)};
  return {0.0, fmt::format("none: '{}' is not in the table of GPU peaks (set LLMC_PEAK_TFLOPS)", device_name)};
}

}  // namespace llmc
