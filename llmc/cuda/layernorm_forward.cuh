// LayerNorm forward, the trainer's: each warp's row held in registers, or, for rows too wide for
// that, layernorm.cuh's staged kernel.
//
// The staged kernel reads a row once from global memory, but writes it to shared memory and reads
// it back twice, and, because the residual it stores may alias its inputs, cannot issue the next
// vector's loads before the previous vector's store: one 16-byte load per lane and input in flight
// per warp. Here a lane loads all of its vectors of the row (C/8/32 per input: 3 at C=768 in bf16)
// before it adds or stores anything, keeps them in registers, and takes the mean, the variance and
// the output from that copy: no shared memory, every load of the row in flight at once. The sums
// run over the same values in the same order as the staged kernel's (lane by lane, vector v = lane,
// lane + 32, ..., within a vector k = 0..S-1, then the same butterfly), so the outputs, mean and rstd
// are bit-identical to it.
//
// Layer 0's LayerNorm has an add before it too: the encoder's wte[token] + wpe[position]. With
// kEmbedding, the kernel is also the encoder forward: it reads the token's wte row and the
// position's wpe row, writes their sum (rounded to Real, as encoder_forward_kernel does) as the
// residual stream, and normalizes it, so the residual is not read back.
#pragma once
#include "llmc/cuda/encoder.cuh"
#include "llmc/cuda/layernorm.cuh"

namespace llmc {

// Where a row's x comes from: one input; the sum of two rows a + b (the residual add); the sum of
// wte[tokens[row]] and wpe[row % T] (the encoder).
enum class LayerNormSource { kInput, kResidual, kEmbedding };

// The most 16-byte vectors of a row one lane holds: rows of up to kLayerNormRegisterVectors * 32 * S
// channels (2,048 in bf16, 1,024 in fp32) go through registers, longer ones through the staged kernel.
constexpr int kLayerNormRegisterVectors = 8;
constexpr int kLayerNormRegisterWarps = 8;  // rows per block, as the staged kernel at C=768

// kVectors: ceil(C / S / 32), the vectors of the row a lane holds (the last ones may be past the row
// for some lanes). With kResidual, x = a + b rounded to Real is also written to residual_out (which
// may alias a or b); with kEmbedding, a is wte, b is wpe, and the rows are tokens[row] and row % T.
template <class Real, LayerNormSource kSource, int kVectors>
__global__ void layernorm_forward_registers_kernel(Real* out, Real* residual_out, float* mean, float* rstd,
                                                   const Real* a, const Real* b, const int* tokens, int T,
                                                   const Real* weight, const Real* bias, int N, int C, Fp8Sink fp8) {
  constexpr int S = Packed128<Real>::size;
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int row = blockIdx.x * (blockDim.x / kWarpSize) + warp;
  if (row >= N) return;
  const long long base = static_cast<long long>(row) * C;
  const int vectors = C / S;
  const Real* a_row = a + base;
  const Real* b_row = b + base;
  if constexpr (kSource == LayerNormSource::kEmbedding) {
    a_row = a + static_cast<long long>(tokens[row]) * C;
    b_row = b + static_cast<long long>(row % T) * C;
  }

  // Every load first: nothing stored yet, so nothing (residual_out may alias a or b) orders them.
  Packed128<Real> x[kVectors];
  [[maybe_unused]] Packed128<Real> y[kSource == LayerNormSource::kInput ? 1 : kVectors];
#pragma unroll
  for (int j = 0; j < kVectors; ++j) {
    const int v = lane + j * kWarpSize;
    if (v >= vectors) break;
    if constexpr (kSource == LayerNormSource::kEmbedding) {
      // Embedding rows are reused by repeated tokens and by every b: keep them cacheable.
      x[j] = load128(a_row + v * S);
      y[j] = load128(b_row + v * S);
    } else {
      x[j] = load128cs(a_row + v * S);
      if constexpr (kSource == LayerNormSource::kResidual) y[j] = load128cs(b_row + v * S);
    }
  }

  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kVectors; ++j) {
    const int v = lane + j * kWarpSize;
    if (v >= vectors) break;
    if constexpr (kSource != LayerNormSource::kInput) {
#pragma unroll
      for (int k = 0; k < S; ++k) x[j][k] = Real(float(x[j][k]) + float(y[j][k]));
      store128(residual_out + base + v * S, x[j]);
    }
#pragma unroll
    for (int k = 0; k < S; ++k) sum += float(x[j][k]);
  }
  const float m = warp_reduce_sum(sum) / C;

  float sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kVectors; ++j) {
    if (lane + j * kWarpSize >= vectors) break;
#pragma unroll
    for (int k = 0; k < S; ++k) {
      const float d = float(x[j][k]) - m;
      sq += d * d;
    }
  }
  const float s = rsqrtf(warp_reduce_sum(sq) / C + kLayerNormEpsF);

  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < kVectors; ++j) {
    const int v = lane + j * kWarpSize;
    if (v >= vectors) break;
    amax = fmaxf(amax, layernorm_store_vector(out, base, v * S, x[j], m, s, weight, bias, fp8));
  }
  layernorm_finish_row(fp8, amax, row, lane, mean, rstd, m, s);
}

// The vectors per lane a row of C channels needs in the registers kernel, or 0 when it is longer
// than the kernel holds (the staged kernel then runs).
inline int layernorm_register_vectors(int C) {
  require_whole_vectors("layernorm", "channels", C);
  const int vectors_per_lane = ceil_div(C / Packed128<floatX>::size, kWarpSize);
  return vectors_per_lane <= kLayerNormRegisterVectors ? vectors_per_lane : 0;
}

// Launches the registers kernel with `vectors` (1..kLayerNormRegisterVectors) as its template
// argument, kLayerNormRegisterWarps rows per block (or `warps`, when positive).
template <LayerNormSource kSource, int kVectors = 1>
void launch_layernorm_forward_registers(int vectors, int warps, floatX* out, floatX* residual_out, float* mean,
                                        float* rstd, const floatX* a, const floatX* b, const int* tokens, int T,
                                        const floatX* weight, const floatX* bias, int N, int C, cudaStream_t stream,
                                        const Fp8Sink& fp8) {
  if constexpr (kVectors < kLayerNormRegisterVectors) {
    if (vectors > kVectors) {
      launch_layernorm_forward_registers<kSource, kVectors + 1>(vectors, warps, out, residual_out, mean, rstd, a, b,
                                                                tokens, T, weight, bias, N, C, stream, fp8);
      return;
    }
  }
  warps = warps > 0 ? warps : kLayerNormRegisterWarps;
  launch<layernorm_forward_registers_kernel<floatX, kSource, kVectors>>(
      ceil_div(N, warps), warps * kWarpSize, 0, stream, out, residual_out, mean, rstd, a, b, tokens, T, weight, bias,
      N, C, fp8);
  CUDA_CHECK_LAST();
}

// out, inp: N x C with C a multiple of 8; mean, rstd: N floats or null (inference); fp8: where
// out's FP8 copy goes, if anywhere (llmc/cuda/fp8.cuh: the next GEMM's operand under --fp8 1).
inline void layernorm_forward(floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* weight,
                              const floatX* bias, int N, int C, cudaStream_t stream, const Fp8Sink& fp8 = {}) {
  const int vectors = layernorm_register_vectors(C);
  if (vectors == 0) {
    layernorm_forward_staged(out, mean, rstd, inp, weight, bias, N, C, stream, fp8);
    return;
  }
  launch_layernorm_forward_registers<LayerNormSource::kInput>(vectors, 0, out, nullptr, mean, rstd, inp, nullptr,
                                                              nullptr, 1, weight, bias, N, C, stream, fp8);
}

// residual_out = a + b; out = LayerNorm(residual_out). residual_out may alias a or b.
inline void fused_residual_layernorm_forward(floatX* residual_out, floatX* out, float* mean, float* rstd,
                                             const floatX* a, const floatX* b, const floatX* weight,
                                             const floatX* bias, int N, int C, cudaStream_t stream,
                                             const Fp8Sink& fp8 = {}) {
  const int vectors = layernorm_register_vectors(C);
  if (vectors == 0) {
    fused_residual_layernorm_forward_staged(residual_out, out, mean, rstd, a, b, weight, bias, N, C, stream, fp8);
    return;
  }
  launch_layernorm_forward_registers<LayerNormSource::kResidual>(vectors, 0, out, residual_out, mean, rstd, a, b,
                                                                 nullptr, 1, weight, bias, N, C, stream, fp8);
}

// The encoder forward (residual_out = wte[tokens] + wpe[positions], B x T rows) and layer 0's
// LayerNorm of it: one launch, or, for rows too wide for the registers kernel, two (encoder_forward,
// then the staged kernel).
inline void encoder_layernorm_forward(floatX* residual_out, floatX* out, float* mean, float* rstd, const int* tokens,
                                      const floatX* wte, const floatX* wpe, const floatX* weight, const floatX* bias,
                                      int B, int T, int C, cudaStream_t stream, const Fp8Sink& fp8 = {}) {
  const int vectors = layernorm_register_vectors(C);
  if (vectors == 0) {
    encoder_forward(residual_out, tokens, wte, wpe, B, T, C, stream);
    layernorm_forward_staged(out, mean, rstd, residual_out, weight, bias, B * T, C, stream, fp8);
    return;
  }
  launch_layernorm_forward_registers<LayerNormSource::kEmbedding>(vectors, 0, out, residual_out, mean, rstd, wte, wpe,
                                                                  tokens, T, weight, bias, B * T, C, stream, fp8);
}

}  // namespace llmc
