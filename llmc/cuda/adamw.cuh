// AdamW on the GPU, the formula of its CPU oracle llmc/cpu/adamw.h with the gradient clipping fused
// in. p is the fp32 master copy; the floatX parameters the forward pass reads are then written from it
// rounded to nearest. They are a function of the master copy alone, so a checkpoint (which holds
// the master copy) restores them exactly, and every rank's copy of a ZeRO-1 shard is the same. The
// updates far below bf16's resolution accumulate in the master copy. Weight decay is per tensor:
// the caller launches once per tensor slice with its decay.
#pragma once
#include <cmath>
#include <cstdint>

#include "llmc/cpu/adamw.h"
#include "llmc/cuda/common.cuh"
#include "llmc/optim/optimizer.h"

namespace llmc {

struct AdamWArgs {
  float lr, beta1, beta2, eps, weight_decay;
  float correction1, correction2;  // 1 - beta^t
  float grad_scale;
};

// Updates m, v and returns the new master value of one parameter.
__device__ inline float adamw_step(float p, float grad, float& m, float& v, const AdamWArgs& a) {
  const float g = grad * a.grad_scale;
  m = a.beta1 * m + (1.0f - a.beta1) * g;
  v = a.beta2 * v + (1.0f - a.beta2) * g * g;
  const float m_hat = m / a.correction1;
  const float v_hat = v / a.correction2;
  return p - a.lr * (m_hat / (sqrtf(v_hat) + a.eps) + a.weight_decay * p);
}

// One element per thread: works for any n and alignment.
template <class Real>
__global__ void adamw_scalar_kernel(Real* params, float* master, const Real* grads, float* m, float* v, size_t n,
                                    AdamWArgs a) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float mi = m[i], vi = v[i];
  const float p = adamw_step(master ? master[i] : float(params[i]), float(grads[i]), mi, vi, a);
  m[i] = mi;
  v[i] = vi;
  if (master) master[i] = p;
  params[i] = Real(p);
}

// One 16-byte vector of parameters/gradients per thread, with the fp32 state as 16-byte vectors too.
template <class Real>
__global__ void adamw_vector_kernel(Real* params, float* master, const Real* grads, float* m, float* v, size_t n,
                                    AdamWArgs a) {
  constexpr int S = Packed128<Real>::size;
  constexpr int F = Packed128<float>::size;
  const size_t i = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) * S;
  if (i >= n) return;
  const Packed128<Real> g = load128cs(grads + i);
  // Without a master copy the parameters themselves are the values being updated.
  const Packed128<Real> p_low = master ? Packed128<Real>::zeros() : load128(params + i);
  Packed128<Real> p_out;
#pragma unroll
  for (int f = 0; f < S; f += F) {
    Packed128<float> mv = load128cs(m + i + f);
    Packed128<float> vv = load128cs(v + i + f);
    Packed128<float> pm;
    if (master) pm = load128cs(master + i + f);
#pragma unroll
    for (int k = 0; k < F; ++k) {
      const float p_old = master ? pm[k] : float(p_low[f + k]);
      pm[k] = adamw_step(p_old, float(g[f + k]), mv[k], vv[k], a);
      p_out[f + k] = Real(pm[k]);
    }
    store128cs(m + i + f, mv);
    store128cs(v + i + f, vv);
    if (master) store128cs(master + i + f, pm);
  }
  store128(params + i, p_out);
}

// The kernels' scalars for one step, with the bias corrections 1 - beta^t computed once.
inline AdamWArgs adamw_args(const OptimizerStep& step, const AdamWHyper& hyper, float weight_decay) {
  return {step.lr,
          hyper.beta1,
          hyper.beta2,
          hyper.eps,
          weight_decay,
          static_cast<float>(1.0 - std::pow(static_cast<double>(hyper.beta1), step.t)),
          static_cast<float>(1.0 - std::pow(static_cast<double>(hyper.beta2), step.t)),
          step.grad_scale};
}

// One AdamW step over a slice whose state tensors 0 and 1 are m and v. slice.master may be null,
// in which case the parameters hold the master values themselves (the FP32 build).
inline void adamw_update(const OptimizerSlice<floatX>& slice, const OptimizerStep& step, const AdamWHyper& hyper,
                         cudaStream_t stream) {
  const AdamWArgs a = adamw_args(step, hyper, slice.weight_decay);
  floatX* params = slice.params;
  float* master = slice.master;
  const floatX* grads = slice.grads;
  float* m = slice.state_at(0);
  float* v = slice.state_at(1);
  const size_t n = slice.n;
  constexpr int block = 256;
  constexpr int S = Packed128<floatX>::size;
  const bool aligned = ((reinterpret_cast<uintptr_t>(params) | reinterpret_cast<uintptr_t>(grads) |
                         reinterpret_cast<uintptr_t>(master) | reinterpret_cast<uintptr_t>(m) |
                         reinterpret_cast<uintptr_t>(v)) % 16) == 0;
  if (aligned && n % S == 0) {
    launch<adamw_vector_kernel<floatX>>(ceil_div(static_cast<long long>(n / S), block), block, 0, stream, params,
                                        master, grads, m, v, n, a);
  } else {
    launch<adamw_scalar_kernel<floatX>>(ceil_div(static_cast<long long>(n), block), block, 0, stream, params, master,
                                        grads, m, v, n, a);
  }
  CUDA_CHECK_LAST();
}

}  // namespace llmc
