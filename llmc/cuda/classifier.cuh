// Fused softmax + cross-entropy + its gradient, one thread block per row of logits, never writing
// the probabilities to memory. For row n with logits x (Vp columns, the first V real):
//   loss[n] = log(sum_j exp(x_j - m)) + m - x[target],   m = max_j x_j   (j < V)
//   x_j <- dloss * (exp(x_j - m) / sum - [j == target])   for j < V,   x_j <- 0 for V <= j < Vp.
// Max and sum are found in one pass with the online rescaling sum' = sum * exp(m - m') + ...,
// so the row is read twice (the second time mostly from L2) and written once. With fast math
// (llmc/cuda/fast_math.cuh) every exp(x - m) is 2^(x log2e - m log2e): one FFMA and ex2.approx.
#pragma once
#include <cmath>
#include <stdexcept>
#include <string>

#include "llmc/cuda/common.cuh"
#include "llmc/cuda/fast_math.cuh"

namespace llmc {

// A running softmax normaliser: sum of exp(x - max) over the values seen.
struct SoftmaxStat {
  float max;
  float sum;
};

template <bool kFast>
__device__ inline SoftmaxStat softmax_combine(SoftmaxStat a, SoftmaxStat b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return {m, 0.0f};  // both empty
  return {m, a.sum * ExpBase<kFast>::exp(a.max - m) + b.sum * ExpBase<kFast>::exp(b.max - m)};
}

template <bool kFast>
__device__ inline SoftmaxStat warp_reduce_softmax(SoftmaxStat s) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    const SoftmaxStat other{__shfl_xor_sync(0xffffffffu, s.max, offset), __shfl_xor_sync(0xffffffffu, s.sum, offset)};
    s = softmax_combine<kFast>(s, other);
  }
  return s;
}

template <class Real, bool kFast>
__global__ void fused_classifier_kernel(Real* logits, float* losses, const int* targets, int V, int Vp, float dloss,
                                        bool write_dlogits) {
  constexpr int S = Packed128<Real>::size;
  using Exp = ExpBase<kFast>;
  constexpr float unit = Exp::kUnit;
  LLMC_SHARED(float, shared_max, [kMaxWarpsPerBlock]);
  LLMC_SHARED(float, shared_sum, [kMaxWarpsPerBlock]);
  const int row = blockIdx.x;
  Real* x = logits + static_cast<long long>(row) * Vp;
  const int target = targets[row];
  // Read before the barrier below: after it, other threads may overwrite this column.
  const float target_logit = threadIdx.x == 0 ? float(x[target]) : 0.0f;

  SoftmaxStat stat{-INFINITY, 0.0f};
  const int vectors = Vp / S;
  for (int v = threadIdx.x; v < vectors; v += blockDim.x) {
    const Packed128<Real> xv = load128(x + v * S);
    float vmax = -INFINITY;
#pragma unroll
    for (int k = 0; k < S; ++k)
      if (v * S + k < V) vmax = fmaxf(vmax, float(xv[k]));
    if (vmax == -INFINITY) continue;  // a vector of padding only
    const float m = fmaxf(stat.max, vmax);
    float sum = stat.sum * Exp::exp(stat.max - m);
    const float shift = m * unit;
#pragma unroll
    for (int k = 0; k < S; ++k)
      if (v * S + k < V) sum += Exp::power(fmaf(float(xv[k]), unit, -shift));
    stat = {m, sum};
  }
  stat = warp_reduce_softmax<kFast>(stat);
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  if (lane == 0) {
    shared_max[warp] = stat.max;
    shared_sum[warp] = stat.sum;
  }
  __syncthreads();
  const int warps = blockDim.x / kWarpSize;
  stat = lane < warps ? SoftmaxStat{shared_max[lane], shared_sum[lane]} : SoftmaxStat{-INFINITY, 0.0f};
  stat = warp_reduce_softmax<kFast>(stat);

  if (threadIdx.x == 0) losses[row] = logf(stat.sum) + stat.max - target_logit;
  if (!write_dlogits) return;
  const float inv_sum = 1.0f / stat.sum;
  const float shift = stat.max * unit;
  for (int v = threadIdx.x; v < vectors; v += blockDim.x) {
    const Packed128<Real> xv = load128cs(x + v * S);
    Packed128<Real> g;
#pragma unroll
    for (int k = 0; k < S; ++k) {
      const int j = v * S + k;
      const float p = Exp::power(fmaf(float(xv[k]), unit, -shift)) * inv_sum;
      g[k] = j < V ? Real(dloss * (p - (j == target ? 1.0f : 0.0f))) : Real(0.0f);
    }
    store128cs(x + v * S, g);
  }
}

// logits: N x Vp (Vp a multiple of 8), overwritten with dlogits when write_dlogits; losses: N
// unscaled cross-entropies. dloss is the gradient of the quantity being minimised with respect to
// each position's loss: loss_scale / (B*T) for a mean over the micro-batch. Every target must lie
// in [0, V): the data loader guarantees it. fast_math: LLMC_FAST_MATH's exponentials.
inline void fused_classifier(floatX* logits, float* losses, const int* targets, int N, int V, int Vp, float dloss,
                             bool write_dlogits, FastMath fast_math, cudaStream_t stream) {
  if (Vp % Packed128<floatX>::size != 0 || V > Vp)
    throw std::invalid_argument("fused_classifier: padded vocabulary " + std::to_string(Vp) +
                                " must be a multiple of " + std::to_string(Packed128<floatX>::size) +
                                " and at least the vocabulary " + std::to_string(V));
  constexpr int block = 1024;
  with_fast_math(fast_math, [&](auto fast) {
    launch<fused_classifier_kernel<floatX, decltype(fast)::value>>(N, block, 0, stream, logits, losses, targets, V, Vp,
                                                                    dloss, write_dlogits);
  });
  CUDA_CHECK_LAST();
}

}  // namespace llmc
