// LayerNorm on the GPU (eps kLayerNormEps, biased variance), forward with saved fp32 mean/rstd, a forward
// fused with the residual add that precedes every LayerNorm after the first, and the backward pass.
//
// Forward: one warp per row; the row is staged once in shared memory so global memory is read
// once, then mean, variance (two-pass, from the staged copy) and the output follow.
// Backward: one warp per row for dinp; dweight/dbias are summed per warp in shared memory (each
// lane owns fixed channels, so no atomics), then per block in warp order into fp32 partials, then
// over blocks in block order, by a second tiny kernel or (fused) by the main kernel's last block to
// finish: bit-reproducible for a given (N, C), and the same bits either way. Optionally the column
// sums of the residual gradient it writes go the same way into a linear layer's bias gradient
// (LLMC_BIAS_GRAD=layernorm: that layer's output gradient is exactly this residual gradient).
#pragma once
#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "llmc/cuda/common.cuh"
#include "llmc/cuda/fp8.cuh"
#include "llmc/cuda/kernel_scratch.h"
#include "llmc/cuda/reduce.cuh"
#include "llmc/cuda/speed_switches.h"
#include "llmc/gpt2_constants.h"

namespace llmc {

constexpr float kLayerNormEpsF = float(kLayerNormEps);
constexpr int kLayerNormSharedBudget = 48 * 1024;  // the default per-block limit, no opt-in needed

// The output vector at channel c of the row at `base`: out = (x - m) * s * weight + bias, stored,
// and its FP8 copy where fp8.data is set. Returns that vector's amax (0 without FP8). Both forward
// kernels (this file's staged one, layernorm_forward.cuh's registers one) write through it, so their
// outputs are the same arithmetic.
template <class Real>
__device__ inline float layernorm_store_vector(Real* out, long long base, int c, const Packed128<Real>& xv, float m,
                                               float s, const Real* weight, const Real* bias, const Fp8Sink& fp8) {
  constexpr int S = Packed128<Real>::size;
  const Packed128<Real> w = load128(weight + c);
  const Packed128<Real> bb = load128(bias + c);
  Packed128<Real> o;
#pragma unroll
  for (int k = 0; k < S; ++k) o[k] = Real((float(xv[k]) - m) * s * float(w[k]) + float(bb[k]));
  store128(out + base + c, o);
  return fp8.data ? fp8_store_vector(fp8, size_t(base + c), o) : 0.0f;
}

// The end of a warp's row: the FP8 amax recorded (every lane takes part), mean and rstd kept where
// they are wanted.
__device__ inline void layernorm_finish_row(const Fp8Sink& fp8, float amax, int row, int lane, float* mean, float* rstd,
                                            float m, float s) {
  if (fp8.amax) fp8_record_warp_amax(fp8.amax, amax, row);
  if (lane == 0) {
    if (mean) mean[row] = m;
    if (rstd) rstd[row] = s;
  }
}

// With kResidual, x = a + b (rounded to Real, the stored residual stream) is also written to
// residual_out; otherwise x = a. mean/rstd may be null (inference). With fp8.data, the output's FP8
// copy too (llmc/cuda/fp8.cuh: the next GEMM's operand under --fp8 1).
template <class Real, bool kResidual>
__global__ void layernorm_forward_kernel(Real* out, Real* residual_out, float* mean, float* rstd, const Real* a,
                                         const Real* b, const Real* weight, const Real* bias, int N, int C,
                                         Fp8Sink fp8) {
  constexpr int S = Packed128<Real>::size;
  const int warps = blockDim.x / kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int row = blockIdx.x * warps + warp;
  if (row >= N) return;
  Real* x = dynamic_shared<Real>() + static_cast<size_t>(warp) * C;
  const long long base = static_cast<long long>(row) * C;
  const int vectors = C / S;

  float sum = 0.0f;
  for (int v = lane; v < vectors; v += kWarpSize) {
    Packed128<Real> xv = load128cs(a + base + v * S);
    if constexpr (kResidual) {
      const Packed128<Real> bv = load128cs(b + base + v * S);
#pragma unroll
      for (int k = 0; k < S; ++k) xv[k] = Real(float(xv[k]) + float(bv[k]));
      store128(residual_out + base + v * S, xv);
    }
    store128(x + v * S, xv);
#pragma unroll
    for (int k = 0; k < S; ++k) sum += float(xv[k]);
  }
  const float m = warp_reduce_sum(sum) / C;

  // Each lane re-reads only the vectors it staged itself, so no barrier is needed.
  float sq = 0.0f;
  for (int v = lane; v < vectors; v += kWarpSize) {
    const Packed128<Real> xv = load128(x + v * S);
#pragma unroll
    for (int k = 0; k < S; ++k) {
      const float d = float(xv[k]) - m;
      sq += d * d;
    }
  }
  const float s = rsqrtf(warp_reduce_sum(sq) / C + kLayerNormEpsF);

  float amax = 0.0f;
  for (int v = lane; v < vectors; v += kWarpSize)
    amax = fmaxf(amax, layernorm_store_vector(out, base, v * S, load128(x + v * S), m, s, weight, bias, fp8));
  layernorm_finish_row(fp8, amax, row, lane, mean, rstd, m, s);
}

// Warps per block such that each warp's staged row fits the shared-memory budget.
inline int layernorm_forward_warps(int C) {
  require_whole_vectors("layernorm", "channels", C);
  const int per_warp = C * static_cast<int>(sizeof(floatX));
  return std::clamp(kLayerNormSharedBudget / per_warp, 1, 8);
}

// out, inp: N x C with C a multiple of 8; mean, rstd: N floats or null; fp8: where out's FP8 copy
// goes, if anywhere.
inline void layernorm_forward(floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* weight,
                              const floatX* bias, int N, int C, cudaStream_t stream, const Fp8Sink& fp8 = {}) {
  const int warps = layernorm_forward_warps(C);
  const size_t shared = static_cast<size_t>(warps) * C * sizeof(floatX);
  launch<layernorm_forward_kernel<floatX, false>>(ceil_div(N, warps), warps * kWarpSize, shared, stream, out, nullptr,
                                                  mean, rstd, inp, nullptr, weight, bias, N, C, fp8);
  CUDA_CHECK_LAST();
}

// residual_out = a + b; out = LayerNorm(residual_out). residual_out may alias a or b.
inline void fused_residual_layernorm_forward(floatX* residual_out, floatX* out, float* mean, float* rstd,
                                             const floatX* a, const floatX* b, const floatX* weight,
                                             const floatX* bias, int N, int C, cudaStream_t stream,
                                             const Fp8Sink& fp8 = {}) {
  const int warps = layernorm_forward_warps(C);
  const size_t shared = static_cast<size_t>(warps) * C * sizeof(floatX);
  launch<layernorm_forward_kernel<floatX, true>>(ceil_div(N, warps), warps * kWarpSize, shared, stream, out,
                                                 residual_out, mean, rstd, a, b, weight, bias, N, C, fp8);
  CUDA_CHECK_LAST();
}

// The backward grid is fixed by (N, C) and whether it carries a bias gradient alone (at most
// kLayerNormBackwardMaxBlocks, or kLayerNormBackwardMaxBlocksWithBias, kernel_scratch.h), so the
// summation order (and the result) is too. Each warp keeps `sums` per-channel sums in shared memory:
// dweight and dbias, and with a bias gradient the residual gradient's column sums.
inline int layernorm_backward_sums(bool with_bias) { return with_bias ? 3 : 2; }

inline int layernorm_backward_warps(int C, bool with_bias) {
  require_whole_vectors("layernorm_backward", "channels", C);
  const int per_warp = layernorm_backward_sums(with_bias) * C * static_cast<int>(sizeof(float));
  return std::clamp(kLayerNormSharedBudget / per_warp, 1, 8);
}

inline int layernorm_backward_blocks(int N, int C, bool with_bias) {
  return std::min(ceil_div(N, layernorm_backward_warps(C, with_bias)),
                  with_bias ? kLayerNormBackwardMaxBlocksWithBias : kLayerNormBackwardMaxBlocks);
}

// The three per-channel gradients LayerNorm backward sums over rows: output i of the
// `sums` * C (partial i of a block) is dweight[i] for i < C, dbias[i - C] below 2C, and
// dres_bias[i - 2C] (the residual gradient's column sums, when carried) above.
template <class Real>
struct LayerNormGradSums {
  Real* dweight;
  Real* dbias;
  Real* dres_bias;  // null: not carried
  __device__ int outputs(int C) const { return (dres_bias ? 3 : 2) * C; }
  __device__ Real* at(int i, int C) const {
    return i < C ? dweight + i : i < 2 * C ? dbias + (i - C) : dres_bias + (i - 2 * C);
  }
};

// Each output += the sum over blocks of its partials, in block order from 0.0f; for outputs first,
// first + stride, ..., first + (kOutputs - 1) stride below outputs(C), each with its own accumulator
// so that their loads are independent. The partials are read at L2 (__ldcg): the fused kernel's
// last block reads what other blocks wrote during the same kernel, which an SM's L1 may not hold
// coherently.
template <int kOutputs, class Real>
__device__ void layernorm_backward_add_partials(const LayerNormGradSums<Real>& g, const float* partials, int blocks,
                                                int C, int first, int stride) {
  const int outputs = g.outputs(C);
  if (first >= outputs) return;
  float total[kOutputs] = {};
  for (int blk = 0; blk < blocks; ++blk) {
    const float* block_partial = partials + static_cast<size_t>(blk) * outputs;
#pragma unroll
    for (int j = 0; j < kOutputs; ++j)
      if (first + j * stride < outputs) total[j] += __ldcg(block_partial + first + j * stride);
  }
#pragma unroll
  for (int j = 0; j < kOutputs; ++j) {
    const int i = first + j * stride;
    if (i >= outputs) break;
    Real* dst = g.at(i, C);
    *dst = Real(float(*dst) + total[j]);
  }
}

// Outputs the fused kernel's last block sums at once, per thread.
constexpr int kLayerNormFinishOutputs = 8;

// Shared layout per warp: the dweight, dbias (and dres_bias) sums, each stored as [k][vector]
// (channel v*S+k at k*vectors+v) so that the kWarpSize lanes, which own consecutive vectors, hit as
// many different banks. dres_bias sums dinp as stored (rounded to Real), after this LayerNorm's
// contribution is added: the bias gradient kernels' sum of the same tensor, in another order.
// kFused: the block that finishes last (counted in scratch_counter(scratch) after a __threadfence,
// the programming guide's last-block pattern) also adds every block's partials to the outputs,
// exactly as layernorm_backward_finish_kernel does, then sets the counter back to 0 for the next call.
// With fp8.data, dinp's FP8 copy of each vector as stored, its amax recorded per row (llmc/cuda/fp8.cuh).
// kPrefetch (LLMC_LAYERNORM_BACKWARD_PREFETCH): at a row's start each lane asks for its vectors of
// dout, inp and dinp, of this row or of its next one, to be brought into L2.
template <class Real, bool kFused, LayerNormBackwardPrefetch kPrefetch>
__device__ inline void layernorm_backward_rows(Real* dinp, const LayerNormGradSums<Real>& grads, float* scratch,
                                               const Real* dout, const Real* inp, const Real* weight,
                                               const float* mean, const float* rstd, int N, int C,
                                               const Fp8Sink& fp8) {
  constexpr int S = Packed128<Real>::size;
  const int outputs = grads.outputs(C);
  const bool carry = grads.dres_bias != nullptr;
  float* sums = dynamic_shared<float>();  // [warps][outputs]
  const int warps = blockDim.x / kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int vectors = C / S;
  float* dw_sum = sums + static_cast<size_t>(warp) * outputs;
  float* db_sum = dw_sum + C;
  float* dr_sum = db_sum + C;  // only with carry
  for (int v = lane; v < vectors; v += kWarpSize)
#pragma unroll
    for (int k = 0; k < S; ++k) {
      dw_sum[k * vectors + v] = db_sum[k * vectors + v] = 0.0f;
      if (carry) dr_sum[k * vectors + v] = 0.0f;
    }

  const int row_step = gridDim.x * warps;
  for (int row = blockIdx.x * warps + warp; row < N; row += row_step) {
    const long long base = static_cast<long long>(row) * C;
    if constexpr (kPrefetch != LayerNormBackwardPrefetch::kOff) {
      const int ahead = kPrefetch == LayerNormBackwardPrefetch::kRow ? row : row + row_step;
      if (ahead < N) {
        const long long ahead_base = static_cast<long long>(ahead) * C;
        for (int v = lane; v < vectors; v += kWarpSize) {
          prefetch_l2(dout + ahead_base + v * S);
          prefetch_l2(inp + ahead_base + v * S);
          prefetch_l2(dinp + ahead_base + v * S);
        }
      }
    }
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
        if (carry) dr_sum[k * vectors + v] += float(di[k]);
      }
      store128(dinp + base + v * S, di);
      if (fp8.data) amax = fmaxf(amax, fp8_store_vector(fp8, size_t(base + v * S), di));
    }
    if (fp8.amax) fp8_record_warp_amax(fp8.amax, amax, row);
  }
  __syncthreads();
  float* partials = scratch_partials(scratch);
  float* block_partial = partials + static_cast<size_t>(blockIdx.x) * outputs;
  for (int i = threadIdx.x; i < outputs; i += blockDim.x) {
    const int which = i / C;  // 0: dweight, 1: dbias, 2: dres_bias
    const int c = i % C;
    const int slot = which * C + (c % S) * vectors + c / S;
    float total = 0.0f;
    for (int w = 0; w < warps; ++w) total += sums[static_cast<size_t>(w) * outputs + slot];
    block_partial[i] = total;
  }
  if constexpr (kFused) {
    // This block's partials reach every SM before its count does.
    __threadfence();
    // Every thread is done with the per-warp sums, so their first word says whether this block is
    // the last: no static shared memory on top of the sums, which fill the default 48 KiB at C=768
    // (a launch asking for more fails).
    __syncthreads();
    if (threadIdx.x == 0) sums[0] = atomicAdd(scratch_counter(scratch), 1u) == gridDim.x - 1 ? 1.0f : 0.0f;
    __syncthreads();
    if (sums[0] == 0.0f) return;
    // Every other block's count, hence (by its fence) its partials, came before this block's.
    __threadfence();
    for (int first = threadIdx.x; first < outputs; first += blockDim.x * kLayerNormFinishOutputs)
      layernorm_backward_add_partials<kLayerNormFinishOutputs>(grads, partials, gridDim.x, C, first, blockDim.x);
    if (threadIdx.x == 0) atomicExch(scratch_counter(scratch), 0u);
  }
}

template <class Real, bool kFused>
__global__ void layernorm_backward_kernel(Real* dinp, LayerNormGradSums<Real> grads, float* scratch, const Real* dout,
                                          const Real* inp, const Real* weight, const float* mean, const float* rstd,
                                          int N, int C, Fp8Sink fp8) {
  layernorm_backward_rows<Real, kFused, LayerNormBackwardPrefetch::kOff>(dinp, grads, scratch, dout, inp, weight, mean,
                                                                         rstd, N, C, fp8);
}

// With a prefetch: held to the registers (64) of the four 8-warp blocks an SM that the unfused kernel
// has without it (the fused one has three either way).
template <class Real, bool kFused, LayerNormBackwardPrefetch kPrefetch>
__global__ void LLMC_LAUNCH_BOUNDS(8 * kWarpSize, kFused ? 3 : 4)
    layernorm_backward_prefetch_kernel(Real* dinp, LayerNormGradSums<Real> grads, float* scratch, const Real* dout,
                                       const Real* inp, const Real* weight, const float* mean, const float* rstd,
                                       int N, int C, Fp8Sink fp8) {
  layernorm_backward_rows<Real, kFused, kPrefetch>(dinp, grads, scratch, dout, inp, weight, mean, rstd, N, C, fp8);
}

// Each output += the sum over blocks of its partials, in block order. One output per thread.
template <class Real>
__global__ void layernorm_backward_finish_kernel(LayerNormGradSums<Real> grads, const float* partials, int blocks,
                                                 int C) {
  layernorm_backward_add_partials<1>(grads, partials, blocks, C, blockIdx.x * blockDim.x + threadIdx.x,
                                     gridDim.x * blockDim.x);
}

// dinp += dLN/dinp; dweight += sum_n dout * xhat; dbias += sum_n dout; with dres_bias (else null),
// also dres_bias += sum_n dinp, the column sums of dinp as this call leaves it; with fp8.data, dinp's
// FP8 copy as this call leaves it (--fp8 1: the next GEMM's output gradient). scratch is the
// gradient partial-sums scratch, layernorm_backward_scratch_floats(C) floats (kernel_scratch.h), its
// counter at 0. fused: the main kernel's last block adds the partials (one launch, the same bits)
// rather than a second kernel. prefetch: LLMC_LAYERNORM_BACKWARD_PREFETCH (the same results).
inline void layernorm_backward(floatX* dinp, floatX* dweight, floatX* dbias, float* scratch, const floatX* dout,
                               const floatX* inp, const floatX* weight, const float* mean, const float* rstd, int N,
                               int C, bool fused, cudaStream_t stream, floatX* dres_bias = nullptr,
                               const Fp8Sink& fp8 = {},
                               LayerNormBackwardPrefetch prefetch = LayerNormBackwardPrefetch::kOff) {
  const bool with_bias = dres_bias != nullptr;
  const int warps = layernorm_backward_warps(C, with_bias);
  const int blocks = layernorm_backward_blocks(N, C, with_bias);
  const int outputs = layernorm_backward_sums(with_bias) * C;
  const size_t shared = static_cast<size_t>(warps) * outputs * sizeof(float);
  const LayerNormGradSums<floatX> grads{dweight, dbias, dres_bias};
  const auto launch_kernel = [&](auto fused_kernel, auto ahead) {
    constexpr bool kFused = decltype(fused_kernel)::value;
    constexpr LayerNormBackwardPrefetch kPrefetch = decltype(ahead)::value;
    if constexpr (kPrefetch == LayerNormBackwardPrefetch::kOff)
      launch<layernorm_backward_kernel<floatX, kFused>>(blocks, warps * kWarpSize, shared, stream, dinp, grads,
                                                        scratch, dout, inp, weight, mean, rstd, N, C, fp8);
    else
      launch<layernorm_backward_prefetch_kernel<floatX, kFused, kPrefetch>>(
          blocks, warps * kWarpSize, shared, stream, dinp, grads, scratch, dout, inp, weight, mean, rstd, N, C, fp8);
    CUDA_CHECK_LAST();
  };
  const auto with_prefetch = [&](auto fused_kernel) {
    using P = LayerNormBackwardPrefetch;
    with_value_instance<P::kOff, P::kRow, P::kNextRow>(prefetch, "layernorm_backward: LLMC_LAYERNORM_BACKWARD_PREFETCH",
                                                       [&](auto ahead) { launch_kernel(fused_kernel, ahead); });
  };
  if (fused) {
    with_prefetch(std::true_type{});
    return;
  }
  with_prefetch(std::false_type{});
  launch<layernorm_backward_finish_kernel<floatX>>(ceil_div(outputs, 256), 256, 0, stream, grads,
                                                   scratch_partials(scratch), blocks, C);
  CUDA_CHECK_LAST();
}

}  // namespace llmc
