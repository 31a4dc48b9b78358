// GPT-2's fixed numeric constants, the one place for every implementation of its layers: the CPU
// oracle (llmc/cpu/), the CUDA kernels (llmc/cuda/, in float) and the check of a Hugging Face config
// (llmc/io/hf_gpt2.cpp). (The emulated cuBLASLt's GELU epilogue keeps the library's own.) Plain constexpr scalars, which nvcc
// lets device code read.
#pragma once

namespace llmc {

// LayerNorm: rstd = 1 / sqrt(var + kLayerNormEps), GPT-2's layer_norm_epsilon.
constexpr double kLayerNormEps = 1e-5;

// GELU, tanh approximation: gelu(x) = 0.5 x (1 + tanh(kGeluSqrt2OverPi (x + kGeluCubic x^3))).
constexpr double kGeluSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;

}  // namespace llmc
