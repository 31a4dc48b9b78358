// Fused softmax + cross-entropy + its gradient, one thread block per row of logits, never writing
// the probabilities to memory. For row n with logits x (Vp columns, the first V real):
//   loss[n] = log(sum_j exp(x_j - m)) + m - x[target],   m = max_j x_j   (j < V)
//   x_j <- dloss * (exp(x_j - m) / sum - [j == target])   for j < V,   x_j <- 0 for V <= j < Vp.
// Max and sum are found in one pass with the online rescaling sum' = sum * exp(m - m') + ...,
// then a second pass reads the row from memory again (mostly from L2) and writes the gradient, so
// the row is read twice and written once. A thread's vectors are v, v + 1024, ... (six or seven of
// a GPT-2 row; the block is smaller where a row has fewer than 1024 vectors), one in flight at a
// time. (A GPU measured a copy of the row in shared memory, read by the second pass instead, and
// more vectors in flight: neither was faster, docs/gpu-runs.md.)
// A vector of real columns only (and, in the gradient pass, not the target's) skips the per-column
// checks: the same arithmetic, with each product rounded on its own (__fmul_rn) so that the
// compiler fuses it into an FMA in neither form, so the same bits as checking every column.
// With an FP8 sink (--fp8 1, LLMC_FP8_LM_HEAD=on) the gradient pass also writes each stored
// dlogit's FP8 copy and records the block's largest |dlogit|: the bytes and amax a cast of the
// stored dlogits (fp8_cast) would give. Every exp(x - m) is 2^(x log2e - m log2e): one FFMA and
// ex2.approx (llmc/cuda/fast_math.cuh).
#pragma once
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "llmc/cuda/common.cuh"
#include "llmc/cuda/fast_math.cuh"
#include "llmc/cuda/fp8.cuh"

namespace llmc {

// A running softmax normaliser: sum of exp(x - max) over the values seen.
struct SoftmaxStat {
  float max;
  float sum;
};

__device__ inline SoftmaxStat softmax_combine(SoftmaxStat a, SoftmaxStat b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return {m, 0.0f};  // both empty
  return {m, a.sum * FastExp::exp(a.max - m) + b.sum * FastExp::exp(b.max - m)};
}

__device__ inline SoftmaxStat warp_reduce_softmax(SoftmaxStat s) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    const SoftmaxStat other{__shfl_xor_sync(0xffffffffu, s.max, offset), __shfl_xor_sync(0xffffffffu, s.sum, offset)};
    s = softmax_combine(s, other);
  }
  return s;
}

// The dynamic shared memory of a block: a SoftmaxStat per warp, the block reduction's.
constexpr size_t kClassifierSharedBytes = kMaxWarpsPerBlock * sizeof(SoftmaxStat);

// Threads per block: a row per block.
constexpr int kClassifierBlock = 1024;

// The block for rows of Vp columns: kClassifierBlock, or the row's vectors rounded up to a whole
// warp where that is fewer (a small vocabulary), so that no warp of the block is without a vector.
inline int classifier_block(int Vp) {
  return std::min(ceil_div(Vp / Packed128<floatX>::size, kWarpSize) * kWarpSize, kClassifierBlock);
}

// The first pass's step over vector v of the row (its values xv): the running max and sum of the
// row's values seen so far, with the vector's real columns (those below V) added. kAllReal: the
// caller knows every column of the vector is real, so none is checked (the same result).
template <class Real, bool kAllReal = false>
__device__ inline SoftmaxStat softmax_add_vector(SoftmaxStat stat, const Packed128<Real>& xv, int v, int V) {
  constexpr int S = Packed128<Real>::size;
  float vmax = -INFINITY;
#pragma unroll
  for (int k = 0; k < S; ++k)
    if (kAllReal || v * S + k < V) vmax = fmaxf(vmax, float(xv[k]));
  if (vmax == -INFINITY) return stat;  // a vector of padding only
  const float m = fmaxf(stat.max, vmax);
  // __fmul_rn: a product the compiler may not fuse with the first add below into one FMA. Whether
  // it did depended on the code around it (that add is conditional in the checked form), so the
  // checked and unchecked forms summed differently on a GPU; rounded alone, they sum alike.
  float sum = __fmul_rn(stat.sum, FastExp::exp(stat.max - m));
  const float shift = m * FastExp::kUnit;
#pragma unroll
  for (int k = 0; k < S; ++k)
    if (kAllReal || v * S + k < V) sum += FastExp::power(fmaf(float(xv[k]), FastExp::kUnit, -shift));
  return {m, sum};
}

// The gradient of vector v of the row (its logits xv), given the row's max (as shift = max * unit)
// and 1 / sum: dloss * (softmax - onehot(target)) in the real columns, 0 in the padding. kPlain:
// the caller knows every column is real and none is the target, so none is checked: dloss * p,
// which is dloss * (p - 0) to the bit.
template <class Real, bool kPlain = false>
__device__ inline Packed128<Real> dlogits_vector(const Packed128<Real>& xv, int v, int V, int target, float shift,
                                                 float inv_sum, float dloss) {
  constexpr int S = Packed128<Real>::size;
  Packed128<Real> g;
#pragma unroll
  for (int k = 0; k < S; ++k) {
    // p rounded alone (__fmul_rn) and p - [j == target] as its own subtraction (__fsub_rn): no
    // FMA of the product with the subtraction in the checked form, so both forms round alike.
    const float p = __fmul_rn(FastExp::power(fmaf(float(xv[k]), FastExp::kUnit, -shift)), inv_sum);
    if constexpr (kPlain) {
      g[k] = Real(dloss * p);
    } else {
      const int j = v * S + k;
      g[k] = j < V ? Real(dloss * __fsub_rn(p, j == target ? 1.0f : 0.0f)) : Real(0.0f);
    }
  }
  return g;
}

// A block per row. kFp8: the gradient pass writes dlogits_fp8 (a template flag, so that the kernel
// without it keeps its registers). One vector a thread in flight fits 32 registers, so two
// 1,024-thread blocks share an SM (the compiler's own choice: the bounds ask for one).
template <class Real, bool kFp8>
__global__ void LLMC_LAUNCH_BOUNDS(kClassifierBlock, 1)
    fused_classifier_kernel(Real* logits, float* losses, const int* targets, int V, int Vp, float dloss,
                            bool write_dlogits, Fp8Sink dlogits_fp8) {
  constexpr int S = Packed128<Real>::size;
  SoftmaxStat* shared_stat = dynamic_shared<SoftmaxStat>();
  const int row = blockIdx.x;
  Real* x = logits + static_cast<long long>(row) * Vp;
  const int target = targets[row];
  // Read before the barrier below: after it, other threads may overwrite this column.
  const float target_logit = threadIdx.x == 0 ? float(x[target]) : 0.0f;

  SoftmaxStat stat{-INFINITY, 0.0f};
  const int vectors = Vp / S;
  // Vectors below this one hold real columns only: they skip the checks.
  const int all_real = V / S;
  const int target_vector = target / S;
  const int stride = int(blockDim.x);
  for (int v = threadIdx.x; v < vectors; v += stride) {
    const Packed128<Real> xv = load128(x + v * S);  // kept in L2 for the second pass
    stat = v < all_real ? softmax_add_vector<Real, true>(stat, xv, v, V) : softmax_add_vector<Real>(stat, xv, v, V);
  }
  stat = warp_reduce_softmax(stat);
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  if (lane == 0) shared_stat[warp] = stat;
  __syncthreads();
  const int warps = blockDim.x / kWarpSize;
  stat = lane < warps ? shared_stat[lane] : SoftmaxStat{-INFINITY, 0.0f};
  stat = warp_reduce_softmax(stat);

  if (threadIdx.x == 0) losses[row] = logf(stat.sum) + stat.max - target_logit;
  if (!write_dlogits) return;
  const float inv_sum = 1.0f / stat.sum;
  const float shift = stat.max * FastExp::kUnit;
  float amax = 0.0f;
  for (int v = threadIdx.x; v < vectors; v += stride) {
    const Packed128<Real> xv = load128cs(x + v * S);
    const Packed128<Real> g = v < all_real && v != target_vector
                                  ? dlogits_vector<Real, true>(xv, v, V, target, shift, inv_sum, dloss)
                                  : dlogits_vector<Real>(xv, v, V, target, shift, inv_sum, dloss);
    store128cs(x + v * S, g);
    if constexpr (kFp8)
      amax = fmaxf(amax, fp8_store_vector(dlogits_fp8, static_cast<size_t>(row) * Vp + v * S, g));
  }
  if (kFp8 && dlogits_fp8.amax) {
    __syncthreads();  // every thread has read the stats: their floats become the amax reduction's
    fp8_record_block_amax(dlogits_fp8.amax, amax, reinterpret_cast<float*>(shared_stat));
  }
}

// logits: N x Vp (Vp a multiple of 8), overwritten with dlogits when write_dlogits; losses: N
// unscaled cross-entropies. dloss is the gradient of the quantity being minimised with respect to
// each position's loss: loss_scale / (B*T) for a mean over the micro-batch. Every target must lie
// in [0, V): the data loader guarantees it. dlogits_fp8 (with write_dlogits; data null: none):
// where the dlogits' FP8 copy goes, N x Vp.
inline void fused_classifier(floatX* logits, float* losses, const int* targets, int N, int V, int Vp, float dloss,
                             bool write_dlogits, cudaStream_t stream, const Fp8Sink& dlogits_fp8 = {}) {
  if (Vp % Packed128<floatX>::size != 0 || V > Vp)
    throw std::invalid_argument("fused_classifier: padded vocabulary " + std::to_string(Vp) +
                                " must be a multiple of " + std::to_string(Packed128<floatX>::size) +
                                " and at least the vocabulary " + std::to_string(V));
  const auto launch_kernel = [&](auto fp8) {
    launch<fused_classifier_kernel<floatX, decltype(fp8)::value>>(N, classifier_block(Vp), kClassifierSharedBytes,
                                                                  stream, logits, losses, targets, V, Vp, dloss,
                                                                  write_dlogits, dlogits_fp8);
  };
  if (write_dlogits && dlogits_fp8.data)
    launch_kernel(std::true_type{});
  else
    launch_kernel(std::false_type{});
}

}  // namespace llmc
