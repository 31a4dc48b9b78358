// LayerNorm backward on the GPU (eps kLayerNormEps, biased variance; the forward is
// layernorm_forward.cuh's): one warp per row for dinp; dweight/dbias are summed per warp in shared
// memory (each lane owns fixed channels, so no atomics), then per block in warp order into fp32
// partials, then over blocks in block order by a second tiny kernel: bit-reproducible for a given
// (N, C).
#pragma once
#include <algorithm>

#include "llmc/cuda/common.cuh"
#include "llmc/cuda/fp8.cuh"
#include "llmc/cuda/kernel_scratch.h"
#include "llmc/cuda/reduce.cuh"
#include "llmc/gpt2_constants.h"

namespace llmc {

constexpr float kLayerNormEpsF = float(kLayerNormEps);
constexpr int kLayerNormSharedBudget = 48 * 1024;  // the default per-block limit, no opt-in needed

// The backward grid is fixed by (N, C) (at most kLayerNormBackwardMaxBlocks, kernel_scratch.h), so
// the summation order (and the result) is too. Each warp keeps 2*C per-channel sums in shared
// memory: dweight's, then dbias's.
inline int layernorm_backward_warps(int C) {
  require_whole_vectors("layernorm_backward", "channels", C);
  const int per_warp = 2 * C * static_cast<int>(sizeof(float));
  return std::clamp(kLayerNormSharedBudget / per_warp, 1, 8);
}

inline int layernorm_backward_blocks(int N, int C) {
  return std::min(ceil_div(N, layernorm_backward_warps(C)), kLayerNormBackwardMaxBlocks);
}

// Shared layout per warp: the dweight and dbias sums, each stored as [k][vector] (channel v*S+k at
// k*vectors+v) so that the kWarpSize lanes, which own consecutive vectors, hit as many different
// banks. Each block leaves its 2*C sums over its warps (dweight's, then dbias's) in its slot of
// `partials`, for layernorm_backward_finish_kernel. With fp8.data, dinp's FP8 copy of each vector
// as stored, its amax recorded per row (llmc/cuda/fp8.cuh).
template <class Real>
__global__ void layernorm_backward_kernel(Real* dinp, float* partials, const Real* dout, const Real* inp,
                                          const Real* weight, const float* mean, const float* rstd, int N, int C,
                                          Fp8Sink fp8) {
  constexpr int S = Packed128<Real>::size;
  const int outputs = 2 * C;
  float* sums = dynamic_shared<float>();  // [warps][outputs]
  const int warps = blockDim.x / kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int vectors = C / S;
  float* dw_sum = sums + static_cast<size_t>(warp) * outputs;
  float* db_sum = dw_sum + C;
  for (int v = lane; v < vectors; v += kWarpSize)
#pragma unroll
    for (int k = 0; k < S; ++k) dw_sum[k * vectors + v] = db_sum[k * vectors + v] = 0.0f;

  for (int row = blockIdx.x * warps + warp; row < N; row += gridDim.x * warps) {
    const long long base = static_cast<long long>(row) * C;
    const float m = mean[row];
    const float s = rstd[row];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int v = lane; v < vectors; v += kWarpSize) {
      const Packed128<Real> d = load128(dout + base + v * S);
      const Packed128<Real> x = load128(inp + base + v * S);
      const Packed128<Real> w = load128(weight + v * S);
#pragma unroll
      for (int k = 0; k < S; ++k) {
        const float g = float(d[k]) * float(w[k]);
        sum_g += g;
        sum_gx += g * (float(x[k]) - m) * s;
      }
    }
    const float mean_g = warp_reduce_sum(sum_g) / C;
    const float mean_gx = warp_reduce_sum(sum_gx) / C;
    // Second pass re-reads this warp's row (an L1 hit) rather than holding C/32 values per lane.
    float amax = 0.0f;
    for (int v = lane; v < vectors; v += kWarpSize) {
      const Packed128<Real> d = load128cs(dout + base + v * S);
      const Packed128<Real> x = load128cs(inp + base + v * S);
      const Packed128<Real> w = load128(weight + v * S);
      Packed128<Real> di = load128(dinp + base + v * S);
#pragma unroll
      for (int k = 0; k < S; ++k) {
        const float xhat = (float(x[k]) - m) * s;
        const float g = float(d[k]) * float(w[k]);
        di[k] = Real(float(di[k]) + s * (g - mean_g - xhat * mean_gx));
        dw_sum[k * vectors + v] += float(d[k]) * xhat;
        db_sum[k * vectors + v] += float(d[k]);
      }
      store128(dinp + base + v * S, di);
      if (fp8.data) amax = fmaxf(amax, fp8_store_vector(fp8, size_t(base + v * S), di));
    }
    if (fp8.amax) fp8_record_warp_amax(fp8.amax, amax, row);
  }
  __syncthreads();
  float* block_partial = partials + static_cast<size_t>(blockIdx.x) * outputs;
  for (int i = threadIdx.x; i < outputs; i += blockDim.x) {
    const int which = i / C;  // 0: dweight, 1: dbias
    const int c = i % C;
    const int slot = which * C + (c % S) * vectors + c / S;
    float total = 0.0f;
    for (int w = 0; w < warps; ++w) total += sums[static_cast<size_t>(w) * outputs + slot];
    block_partial[i] = total;
  }
}

// Output i of the 2*C (dweight[i] below C, dbias[i - C] from C on) += the sum over `blocks` of the
// blocks' partial i, in block order from 0.0f: one output per thread. Each partial is read once, at
// L2 (__ldcg).
template <class Real>
__global__ void layernorm_backward_finish_kernel(Real* dweight, Real* dbias, const float* partials, int blocks, int C) {
  const int outputs = 2 * C;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= outputs) return;
  float total = 0.0f;
  for (int blk = 0; blk < blocks; ++blk) total += __ldcg(partials + static_cast<size_t>(blk) * outputs + i);
  Real* dst = i < C ? dweight + i : dbias + (i - C);
  *dst = Real(float(*dst) + total);
}

// dinp += dLN/dinp; dweight += sum_n dout * xhat; dbias += sum_n dout; with fp8.data, dinp's FP8
// copy as this call leaves it (--fp8 1: the next GEMM's output gradient). scratch is the gradient
// partial-sums scratch, layernorm_backward_scratch_floats(C) floats (kernel_scratch.h).
inline void layernorm_backward(floatX* dinp, floatX* dweight, floatX* dbias, float* scratch, const floatX* dout,
                               const floatX* inp, const floatX* weight, const float* mean, const float* rstd, int N,
                               int C, cudaStream_t stream, const Fp8Sink& fp8 = {}) {
  const int warps = layernorm_backward_warps(C);
  const int blocks = layernorm_backward_blocks(N, C);
  const int outputs = 2 * C;
  const size_t shared = static_cast<size_t>(warps) * outputs * sizeof(float);
  launch<layernorm_backward_kernel<floatX>>(blocks, warps * kWarpSize, shared, stream, dinp, scratch, dout, inp,
                                            weight, mean, rstd, N, C, fp8);
  launch<layernorm_backward_finish_kernel<floatX>>(ceil_div(outputs, 256), 256, 0, stream, dweight, dbias, scratch,
                                                   blocks, C);
}

}  // namespace llmc
