// LayerNorm forward, the trainer's (eps kLayerNormEps, biased variance): a warp per row, held in
// registers, or for rows too wide for them, read again in each pass.
//
// A lane loads all of its vectors of the row (C/8/32 per input: 3 at C=768 in bf16) before it adds
// or stores anything, keeps them in registers, and takes the mean, the variance (two-pass) and the
// output from that copy: no shared memory, every load of the row in flight at once. (A kernel that
// stages the row in shared memory, dev/cuda/layernorm.cu's fwd2, cannot issue the next vector's
// loads before the previous vector's store, as the residual it stores may alias its inputs: one
// 16-byte load per lane and input in flight per warp.) The sums run lane by lane over vector
// v = lane, lane + 32, ..., within a vector k = 0..S-1, then the butterfly: the staged kernel's
// order, so the two are bit-identical, wide rows too (dev/cuda/layernorm.cu checks both).
//
// Layer 0's LayerNorm has an add before it too: the encoder's wte[token] + wpe[position]. With
// kEmbedding, the kernel is also the encoder forward: it reads the token's wte row and the
// position's wpe row, writes their sum (rounded to Real) as the residual stream, and normalizes it,
// so the residual is not read back.
#pragma once
#include "llmc/cuda/layernorm.cuh"

namespace llmc {

// Where a row's x comes from: one input; the sum of two rows a + b (the residual add); the sum of
// wte[tokens[row]] and wpe[row % T] (the encoder).
enum class LayerNormSource { kInput, kResidual, kEmbedding };

// The most 16-byte vectors of a row one lane holds: rows of up to kLayerNormRegisterVectors * 32 * S
// channels (2,048 in bf16, 1,024 in fp32) are held in registers, longer ones read again in each pass.
constexpr int kLayerNormRegisterVectors = 8;
constexpr int kLayerNormRegisterWarps = 8;  // rows per block

// kVectors: ceil(C / S / 32), the vectors of the row a lane holds (the last ones may be past the row
// for some lanes), or 0 for rows too wide to hold: a lane then holds one vector at a time and each
// pass reads the row again, the first from a (and b), the others from where x now is (a, or the
// residual_out just stored: each lane reads back only the vectors it stored itself, so nothing
// orders them), the same values summed in the same order. With kResidual, x = a + b rounded to Real
// is also written to residual_out (which may alias a or b); with kEmbedding, a is wte, b is wpe, and
// the rows are tokens[row] and row % T. With fp8.data, the output's FP8 copy too.
template <class Real, LayerNormSource kSource, int kVectors>
__global__ void layernorm_forward_registers_kernel(Real* out, Real* residual_out, float* mean, float* rstd,
                                                   const Real* a, const Real* b, const int* tokens, int T,
                                                   const Real* weight, const Real* bias, int N, int C, Fp8Sink fp8) {
  constexpr int S = Packed128<Real>::size;
  constexpr bool kHeld = kVectors > 0;
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int row = blockIdx.x * (blockDim.x / kWarpSize) + warp;
  if (row >= N) return;
  const long long base = static_cast<long long>(row) * C;
  const int vectors = C / S;
  // Every loop takes this lane's vectors v = lane + j * 32 of the row, j < lane_vectors.
  const int lane_vectors = kHeld ? kVectors : (vectors + kWarpSize - 1) / kWarpSize;
  const Real* a_row = a + base;
  const Real* b_row = b + base;
  if constexpr (kSource == LayerNormSource::kEmbedding) {
    a_row = a + static_cast<long long>(tokens[row]) * C;
    b_row = b + static_cast<long long>(row % T) * C;
  }
  const Real* x_row = kSource == LayerNormSource::kInput ? a_row : residual_out + base;

  Packed128<Real> x[kHeld ? kVectors : 1];
  [[maybe_unused]] Packed128<Real> y[kHeld && kSource != LayerNormSource::kInput ? kVectors : 1];
  const auto load = [&](int j, int v) {
    if constexpr (kSource == LayerNormSource::kEmbedding) {
      // Embedding rows are reused by repeated tokens and by every b: keep them cacheable.
      x[j] = load128(a_row + v * S);
      y[j] = load128(b_row + v * S);
    } else {
      x[j] = load128cs(a_row + v * S);
      if constexpr (kSource == LayerNormSource::kResidual) y[j] = load128cs(b_row + v * S);
    }
  };
  if constexpr (kHeld) {
    // Every load first: nothing stored yet, so nothing (residual_out may alias a or b) orders them.
#pragma unroll
    for (int j = 0; j < kVectors; ++j) {
      const int v = lane + j * kWarpSize;
      if (v >= vectors) break;
      load(j, v);
    }
  }

  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < lane_vectors; ++j) {
    const int v = lane + j * kWarpSize;
    if (v >= vectors) break;
    const int i = kHeld ? j : 0;
    if constexpr (!kHeld) load(0, v);
    if constexpr (kSource != LayerNormSource::kInput) {
#pragma unroll
      for (int k = 0; k < S; ++k) x[i][k] = Real(float(x[i][k]) + float(y[i][k]));
      store128(residual_out + base + v * S, x[i]);
    }
#pragma unroll
    for (int k = 0; k < S; ++k) sum += float(x[i][k]);
  }
  const float m = warp_reduce_sum(sum) / C;

  float sq = 0.0f;
#pragma unroll
  for (int j = 0; j < lane_vectors; ++j) {
    const int v = lane + j * kWarpSize;
    if (v >= vectors) break;
    const Packed128<Real> xv = kHeld ? x[j] : load128(x_row + v * S);
#pragma unroll
    for (int k = 0; k < S; ++k) {
      const float d = float(xv[k]) - m;
      sq += d * d;
    }
  }
  const float s = rsqrtf(warp_reduce_sum(sq) / C + kLayerNormEpsF);

  // out = (x - m) * s * weight + bias, and its FP8 copy's amax.
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < lane_vectors; ++j) {
    const int v = lane + j * kWarpSize;
    if (v >= vectors) break;
    const Packed128<Real> xv = kHeld ? x[j] : load128(x_row + v * S);
    const Packed128<Real> w = load128(weight + v * S);
    const Packed128<Real> bb = load128(bias + v * S);
    Packed128<Real> o;
#pragma unroll
    for (int k = 0; k < S; ++k) o[k] = Real((float(xv[k]) - m) * s * float(w[k]) + float(bb[k]));
    store128(out + base + v * S, o);
    amax = fmaxf(amax, fp8.data ? fp8_store_vector(fp8, size_t(base + v * S), o) : 0.0f);
  }
  if (fp8.amax) fp8_record_warp_amax(fp8.amax, amax, row);
  if (lane == 0) {
    if (mean) mean[row] = m;
    if (rstd) rstd[row] = s;
  }
}

// The vectors per lane a row of C channels needs in the registers kernel, or 0 when it is longer
// than the kernel holds (the kernel then reads it again in each pass).
inline int layernorm_register_vectors(int C) {
  require_whole_vectors("layernorm", "channels", C);
  const int vectors_per_lane = ceil_div(C / Packed128<floatX>::size, kWarpSize);
  return vectors_per_lane <= kLayerNormRegisterVectors ? vectors_per_lane : 0;
}

// Launches the registers kernel with `vectors` (0..kLayerNormRegisterVectors) as its template
// argument, kLayerNormRegisterWarps rows per block (or `warps`, when positive).
template <LayerNormSource kSource, int kVectors = 0>
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
}

// out, inp: N x C with C a multiple of 8; mean, rstd: N floats or null (inference); fp8: where
// out's FP8 copy goes, if anywhere (llmc/cuda/fp8.cuh: the next GEMM's operand under --fp8 1).
inline void layernorm_forward(floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* weight,
                              const floatX* bias, int N, int C, cudaStream_t stream, const Fp8Sink& fp8 = {}) {
  launch_layernorm_forward_registers<LayerNormSource::kInput>(layernorm_register_vectors(C), 0, out, nullptr, mean,
                                                              rstd, inp, nullptr, nullptr, 1, weight, bias, N, C,
                                                              stream, fp8);
}

// residual_out = a + b; out = LayerNorm(residual_out). residual_out may alias a or b.
inline void fused_residual_layernorm_forward(floatX* residual_out, floatX* out, float* mean, float* rstd,
                                             const floatX* a, const floatX* b, const floatX* weight,
                                             const floatX* bias, int N, int C, cudaStream_t stream,
                                             const Fp8Sink& fp8 = {}) {
  launch_layernorm_forward_registers<LayerNormSource::kResidual>(layernorm_register_vectors(C), 0, out, residual_out,
                                                                 mean, rstd, a, b, nullptr, 1, weight, bias, N, C,
                                                                 stream, fp8);
}

// The encoder forward (residual_out = wte[tokens] + wpe[positions], B x T rows) and layer 0's
// LayerNorm of it, in one launch.
inline void encoder_layernorm_forward(floatX* residual_out, floatX* out, float* mean, float* rstd, const int* tokens,
                                      const floatX* wte, const floatX* wpe, const floatX* weight, const floatX* bias,
                                      int B, int T, int C, cudaStream_t stream, const Fp8Sink& fp8 = {}) {
  launch_layernorm_forward_registers<LayerNormSource::kEmbedding>(layernorm_register_vectors(C), 0, out, residual_out,
                                                                  mean, rstd, wte, wpe, tokens, T, weight, bias,
                                                                  B * T, C, stream, fp8);
}

}  // namespace llmc
