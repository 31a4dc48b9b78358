// GELU (tanh approximation) on the GPU, forward and backward, one 16-byte vector per thread.
//   gelu(x)  = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
//   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// computed in the sigmoid form, since 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + e^(-2u)) and
// 0.5 (1 - tanh(u)^2) = 2 s (1 - s):
//   s = 1 / (1 + 2^(x (A + B x^2))),  A = -2 sqrt(2/pi) log2(e),  B = 0.044715 A
//   gelu(x) = x s,   gelu'(x) = s + x s (1 - s) 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// one ex2.approx (FastExp, llmc/cuda/fast_math.cuh) and one approximate division (__fdividef) for
// tanhf's dozen instructions (an H100 measured it faster, docs/gpu-runs.md). Below about
// x = -10, 1 + 2^(...) passes 2^126 and __fdividef returns 0: gelu and gelu' are then 0, as they are
// in float to within 1e-37. The forward kernel and the recompute (-r 1, 2) both call gelu_forward, so
// they agree bit for bit.
#pragma once
#include <stdexcept>
#include <string>

#include "llmc/cuda/common.cuh"
#include "llmc/cuda/fast_math.cuh"
#include "llmc/cuda/fp8.cuh"
#include "llmc/gpt2_constants.h"

namespace llmc {

constexpr float kGeluScale = float(kGeluSqrt2OverPi);
constexpr float kGeluCubicF = float(kGeluCubic);
// A and B: -2u log2(e) = x (A + B x^2).
constexpr float kGeluExp2Linear = float(-2.0 * kGeluSqrt2OverPi * double(FastExp::kUnit));
constexpr float kGeluExp2Cubic = float(-2.0 * kGeluSqrt2OverPi * double(FastExp::kUnit) * kGeluCubic);

// e^(-2u) = 2^(x (A + B x^2)): one FFMA, two FMULs and ex2.approx.
__device__ inline float gelu_exp_minus_2u(float x) {
  return FastExp::power(x * fmaf(kGeluExp2Cubic, x * x, kGeluExp2Linear));
}

__device__ inline float gelu_value(float x) { return __fdividef(x, 1.0f + gelu_exp_minus_2u(x)); }

__device__ inline float gelu_derivative(float x) {
  const float s = __fdividef(1.0f, 1.0f + gelu_exp_minus_2u(x));     // sigmoid(2u)
  const float du = kGeluScale * (1.0f + 3.0f * kGeluCubicF * x * x);  // du/dx
  return s + 2.0f * x * s * (1.0f - s) * du;
}

// With fp8.data, the output's FP8 copy too (llmc/cuda/fp8.cuh: the next GEMM's operand under --fp8 1).
template <class Real>
__global__ void gelu_forward_kernel(Real* out, const Real* inp, size_t n, Fp8Sink fp8) {
  LLMC_SHARED(float, scratch, [kMaxWarpsPerBlock]);
  constexpr int S = Packed128<Real>::size;
  const size_t thread = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t i = thread * S;
  float amax = 0.0f;
  if (i < n) {
    const Packed128<Real> x = load128cs(inp + i);
    Packed128<Real> y;
#pragma unroll
    for (int k = 0; k < S; ++k) y[k] = Real(gelu_value(float(x[k])));
    store128(out + i, y);
    if (fp8.data) amax = fp8_store_vector(fp8, i, y);
  }
  if (fp8.amax) fp8_record_block_amax(fp8.amax, amax, scratch);
}

// One 16-byte vector of the GELU backward: dinp[i..] = gelu'(inp) * dout, stored and returned (the
// bias-gradient kernels of llmc/cuda/matmul.cuh sum it as they go). dinp may alias dout: the
// vector is read before it is written. With gelu_out, also gelu_out[i..] = gelu(inp), the values the
// forward kernel stores (LLMC_FP8_GELU=epilogue: the forward kept the GELU's output in FP8 only).
template <class Real>
__device__ inline Packed128<Real> gelu_backward_vector(Real* dinp, const Real* inp, const Real* dout, size_t i,
                                                       Real* gelu_out) {
  constexpr int S = Packed128<Real>::size;
  const Packed128<Real> x = load128cs(inp + i);
  const Packed128<Real> d = load128cs(dout + i);
  Packed128<Real> g;
#pragma unroll
  for (int k = 0; k < S; ++k) g[k] = Real(gelu_derivative(float(x[k])) * float(d[k]));
  store128(dinp + i, g);
  if (gelu_out) {
    Packed128<Real> y;
#pragma unroll
    for (int k = 0; k < S; ++k) y[k] = Real(gelu_value(float(x[k])));
    store128(gelu_out + i, y);
  }
  return g;
}

// dinp = gelu'(inp) * dout; dinp may alias dout (each thread reads its vector before writing it).
// With fp8.data, dinp's FP8 copy too; with gelu_out, gelu(inp) there.
template <class Real>
__global__ void gelu_backward_kernel(Real* dinp, const Real* inp, const Real* dout, size_t n, Fp8Sink fp8,
                                     Real* gelu_out) {
  LLMC_SHARED(float, scratch, [kMaxWarpsPerBlock]);
  constexpr int S = Packed128<Real>::size;
  const size_t thread = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t i = thread * S;
  float amax = 0.0f;
  if (i < n) {
    const Packed128<Real> g = gelu_backward_vector<Real>(dinp, inp, dout, i, gelu_out);
    if (fp8.data) amax = fp8_store_vector(fp8, i, g);
  }
  if (fp8.amax) fp8_record_block_amax(fp8.amax, amax, scratch);
}

// fp8: where the output's FP8 copy goes, if anywhere.
inline void gelu_forward(floatX* out, const floatX* inp, size_t n, cudaStream_t stream, const Fp8Sink& fp8 = {}) {
  require_whole_vectors("gelu_forward", "size", n);
  constexpr int block = 256;
  launch<gelu_forward_kernel<floatX>>(ceil_div(static_cast<long long>(n / Packed128<floatX>::size), block), block, 0,
                                      stream, out, inp, n, fp8);
}

inline void gelu_backward(floatX* dinp, const floatX* inp, const floatX* dout, size_t n, cudaStream_t stream,
                          const Fp8Sink& fp8 = {}, floatX* gelu_out = nullptr) {
  require_whole_vectors("gelu_backward", "size", n);
  constexpr int block = 256;
  launch<gelu_backward_kernel<floatX>>(ceil_div(static_cast<long long>(n / Packed128<floatX>::size), block), block, 0,
                                       stream, dinp, inp, dout, n, fp8, gelu_out);
}

}  // namespace llmc
