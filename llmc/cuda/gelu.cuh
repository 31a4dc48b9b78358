// GELU (tanh approximation) on the GPU, forward and backward, one 16-byte vector per thread.
//   gelu(x)  = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
//   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
#pragma once
#include <stdexcept>
#include <string>

#include "llmc/cuda/common.cuh"
#include "llmc/gpt2_constants.h"

namespace llmc {

constexpr float kGeluScale = float(kGeluSqrt2OverPi);
constexpr float kGeluCubicF = float(kGeluCubic);

__device__ inline float gelu_value(float x) {
  const float u = kGeluScale * (x + kGeluCubicF * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}

__device__ inline float gelu_derivative(float x) {
  const float u = kGeluScale * (x + kGeluCubicF * x * x * x);
  const float th = tanhf(u);
  return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * kGeluScale * (1.0f + 3.0f * kGeluCubicF * x * x);
}

template <class Real>
__global__ void gelu_forward_kernel(Real* out, const Real* inp, size_t n) {
  constexpr int S = Packed128<Real>::size;
  const size_t i = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) * S;
  if (i >= n) return;
  const Packed128<Real> x = load128cs(inp + i);
  Packed128<Real> y;
#pragma unroll
  for (int k = 0; k < S; ++k) y[k] = Real(gelu_value(float(x[k])));
  store128(out + i, y);
}

// dinp = gelu'(inp) * dout; dinp may alias dout (each thread reads its vector before writing it).
template <class Real>
__global__ void gelu_backward_kernel(Real* dinp, const Real* inp, const Real* dout, size_t n) {
  constexpr int S = Packed128<Real>::size;
  const size_t i = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) * S;
  if (i >= n) return;
  const Packed128<Real> x = load128cs(inp + i);
  const Packed128<Real> d = load128cs(dout + i);
  Packed128<Real> g;
#pragma unroll
  for (int k = 0; k < S; ++k) g[k] = Real(gelu_derivative(float(x[k])) * float(d[k]));
  store128(dinp + i, g);
}

inline void gelu_forward(floatX* out, const floatX* inp, size_t n, cudaStream_t stream) {
  require_whole_vectors("gelu_forward", "size", n);
  constexpr int block = 256;
  launch<gelu_forward_kernel<floatX>>(ceil_div(static_cast<long long>(n / Packed128<floatX>::size), block), block, 0,
                                      stream, out, inp, n);
  CUDA_CHECK_LAST();
}

inline void gelu_backward(floatX* dinp, const floatX* inp, const floatX* dout, size_t n, cudaStream_t stream) {
  require_whole_vectors("gelu_backward", "size", n);
  constexpr int block = 256;
  launch<gelu_backward_kernel<floatX>>(ceil_div(static_cast<long long>(n / Packed128<floatX>::size), block), block, 0,
                                       stream, dinp, inp, dout, n);
  CUDA_CHECK_LAST();
}

}  // namespace llmc
