// Fused softmax + cross-entropy + its gradient, one thread block per row of logits, never writing
// the probabilities to memory. For row n with logits x (Vp columns, the first V real):
//   loss[n] = log(sum_j exp(x_j - m)) + m - x[target],   m = max_j x_j   (j < V)
//   x_j <- dloss * (exp(x_j - m) / sum - [j == target])   for j < V,   x_j <- 0 for V <= j < Vp.
// Max and sum are found in one pass with the online rescaling sum' = sum * exp(m - m') + ...,
// then a second pass writes the gradient. Where that pass reads the row (LLMC_CLASSIFIER_PASS):
// - two-read: from memory again (mostly from L2), so the row is read twice and written once;
// - one-read: from the block's copy in shared memory, made by the first pass, so the row is read
//   from memory once. A bf16 row of GPT-2's 50,304 columns is 98 KiB: two rows fit an H100 SM's
//   228 KiB, so two blocks per SM still overlap one row's loads with another's arithmetic. (A copy
//   in registers would leave one row per SM: two rows are 196 KiB of its 256 KiB register file,
//   too little left for the other registers of 2,048 threads.)
// Both run the same arithmetic in the same order (the same thread reads the same vectors), so they
// give the same bits. A thread's vectors are v, v + 1024, ... (six or seven of a GPT-2 row); with
// LLMC_CLASSIFIER_LOADS it loads two or four of them at once and then computes on them in that
// order, so that more bytes are in flight while the same bits come out. With LLMC_CLASSIFIER_CHECKS
// =per-vector (the default) a vector of real columns only (and, in the gradient pass, not the
// target's) skips the per-column checks: the same arithmetic, with each product rounded on its own
// (__fmul_rn) so that neither form fuses it into an FMA the other does not: the same bits as
// per-column. With an FP8 sink (--fp8 1,
// LLMC_FP8_LM_HEAD=on) the gradient pass also writes each stored dlogit's FP8 copy and records the
// block's largest |dlogit|: the bytes and amax a cast of the stored dlogits (fp8_cast) would give.
// With fast math (llmc/cuda/fast_math.cuh) every exp(x - m) is 2^(x log2e - m log2e): one FFMA and
// ex2.approx.
#pragma once
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

// The dynamic shared memory of a block: a SoftmaxStat per warp (the block reduction's), then, for
// the one-read kernel, the row's copy (16-byte aligned: the stats take 256 bytes).
inline size_t fused_classifier_shared_bytes(int Vp, bool one_read, size_t real_bytes) {
  return kMaxWarpsPerBlock * sizeof(SoftmaxStat) + (one_read ? size_t(Vp) * real_bytes : 0);
}

// Threads per block: a row per block.
constexpr int kClassifierBlock = 1024;

// The first pass's step over vector v of the row (its values xv): the running max and sum of the
// row's values seen so far, with the vector's real columns (those below V) added. kAllReal: the
// caller knows every column of the vector is real, so none is checked (the same result).
template <class Real, bool kFast, bool kAllReal = false>
__device__ inline SoftmaxStat softmax_add_vector(SoftmaxStat stat, const Packed128<Real>& xv, int v, int V) {
  constexpr int S = Packed128<Real>::size;
  using Exp = ExpBase<kFast>;
  float vmax = -INFINITY;
#pragma unroll
  for (int k = 0; k < S; ++k)
    if (kAllReal || v * S + k < V) vmax = fmaxf(vmax, float(xv[k]));
  if (vmax == -INFINITY) return stat;  // a vector of padding only
  const float m = fmaxf(stat.max, vmax);
  // __fmul_rn: a product the compiler may not fuse with the first add below into one FMA. Whether
  // it did depended on the code around it (that add is conditional in the checked form), so the
  // checked and unchecked forms summed differently on a GPU; rounded alone, they sum alike.
  float sum = __fmul_rn(stat.sum, Exp::exp(stat.max - m));
  const float shift = m * Exp::kUnit;
#pragma unroll
  for (int k = 0; k < S; ++k)
    if (kAllReal || v * S + k < V) sum += Exp::power(fmaf(float(xv[k]), Exp::kUnit, -shift));
  return {m, sum};
}

// The gradient of vector v of the row (its logits xv), given the row's max (as shift = max * unit)
// and 1 / sum: dloss * (softmax - onehot(target)) in the real columns, 0 in the padding. kPlain:
// the caller knows every column is real and none is the target, so none is checked: dloss * p,
// which is dloss * (p - 0) to the bit.
template <class Real, bool kFast, bool kPlain = false>
__device__ inline Packed128<Real> dlogits_vector(const Packed128<Real>& xv, int v, int V, int target, float shift,
                                                 float inv_sum, float dloss) {
  constexpr int S = Packed128<Real>::size;
  using Exp = ExpBase<kFast>;
  Packed128<Real> g;
#pragma unroll
  for (int k = 0; k < S; ++k) {
    // p rounded alone (__fmul_rn) and p - [j == target] as its own subtraction (__fsub_rn): no
    // FMA of the product with the subtraction in the checked form, so both forms round alike.
    const float p = __fmul_rn(Exp::power(fmaf(float(xv[k]), Exp::kUnit, -shift)), inv_sum);
    if constexpr (kPlain) {
      g[k] = Real(dloss * p);
    } else {
      const int j = v * S + k;
      g[k] = j < V ? Real(dloss * __fsub_rn(p, j == target ? 1.0f : 0.0f)) : Real(0.0f);
    }
  }
  return g;
}

// One block's row, for both kernels below; kOneRead: the second pass reads the copy in shared memory;
// kFp8: it writes dlogits_fp8 (a template flag, so that the kernels without the copy keep their
// registers); kLoads (LLMC_CLASSIFIER_LOADS): each pass loads a thread's next kLoads vectors
// (vectors v, v + blockDim.x, ...) before it computes on the first of them, in the order it would
// have loaded them one by one, so that every kLoads gives the same bits. The two passes write that
// batching out each: through one helper taking the passes as lambdas, nvcc 13 spilled twice as
// much at kLoads = 2, which is held to 32 registers. kChecks (LLMC_CLASSIFIER_CHECKS): per vector,
// a vector of real columns only (and in the second pass, not the target's) runs unchecked.
template <class Real, bool kFast, bool kOneRead, bool kFp8, int kLoads, ClassifierChecks kChecks>
__device__ inline void fused_classifier_row(Real* logits, float* losses, const int* targets, int V, int Vp,
                                            float dloss, bool write_dlogits, const Fp8Sink& dlogits_fp8) {
  constexpr int S = Packed128<Real>::size;
  SoftmaxStat* shared_stat = dynamic_shared<SoftmaxStat>();
  Real* copy = reinterpret_cast<Real*>(shared_stat + kMaxWarpsPerBlock);
  const int row = blockIdx.x;
  Real* x = logits + static_cast<long long>(row) * Vp;
  const int target = targets[row];
  // Read before the barrier below: after it, other threads may overwrite this column.
  const float target_logit = threadIdx.x == 0 ? float(x[target]) : 0.0f;

  SoftmaxStat stat{-INFINITY, 0.0f};
  const int vectors = Vp / S;
  // Vectors below this one hold real columns only; under kPerVector they skip the checks.
  const int all_real = kChecks == ClassifierChecks::kPerVector ? V / S : 0;
  const int target_vector = target / S;
  const int stride = int(blockDim.x);
  for (int first = threadIdx.x; first < vectors; first += kLoads * stride) {
    Packed128<Real> xs[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int v = first + u * stride;
      if (v >= vectors) break;
      // Two-read: kept in L2 for the second pass; one-read: never read from memory again.
      xs[u] = kOneRead ? load128cs(x + v * S) : load128(x + v * S);
      if constexpr (kOneRead) store128(copy + v * S, xs[u]);
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int v = first + u * stride;
      if (v >= vectors) break;
      stat = v < all_real ? softmax_add_vector<Real, kFast, true>(stat, xs[u], v, V)
                          : softmax_add_vector<Real, kFast>(stat, xs[u], v, V);
    }
  }
  stat = warp_reduce_softmax<kFast>(stat);
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  if (lane == 0) shared_stat[warp] = stat;
  __syncthreads();
  const int warps = blockDim.x / kWarpSize;
  stat = lane < warps ? shared_stat[lane] : SoftmaxStat{-INFINITY, 0.0f};
  stat = warp_reduce_softmax<kFast>(stat);

  if (threadIdx.x == 0) losses[row] = logf(stat.sum) + stat.max - target_logit;
  if (!write_dlogits) return;
  const float inv_sum = 1.0f / stat.sum;
  const float shift = stat.max * ExpBase<kFast>::kUnit;
  float amax = 0.0f;
  for (int first = threadIdx.x; first < vectors; first += kLoads * stride) {
    Packed128<Real> xs[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int v = first + u * stride;
      if (v >= vectors) break;
      // One-read: the vector this thread copied in the first pass, so no barrier is needed for it.
      xs[u] = kOneRead ? load128(copy + v * S) : load128cs(x + v * S);
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int v = first + u * stride;
      if (v >= vectors) break;
      const Packed128<Real> g =
          v < all_real && v != target_vector
              ? dlogits_vector<Real, kFast, true>(xs[u], v, V, target, shift, inv_sum, dloss)
              : dlogits_vector<Real, kFast>(xs[u], v, V, target, shift, inv_sum, dloss);
      store128cs(x + v * S, g);
      if constexpr (kFp8)
        amax = fmaxf(amax, fp8_store_vector(dlogits_fp8, static_cast<size_t>(row) * Vp + v * S, g));
    }
  }
  if (kFp8 && dlogits_fp8.amax) {
    __syncthreads();  // every thread has read the stats: their floats become the amax reduction's
    fp8_record_block_amax(dlogits_fp8.amax, amax, reinterpret_cast<float*>(shared_stat));
  }
}

// LLMC_CLASSIFIER_LOADS as the kernels' count of vectors a thread loads before it computes.
constexpr int classifier_vectors_in_flight(ClassifierLoads loads) {
  return loads == ClassifierLoads::kFour ? 4 : loads == ClassifierLoads::kTwo ? 2 : 1;
}

// Registers: one vector a thread in flight fits 32, so two 1,024-thread blocks share an SM (the
// compiler's own choice for the two-read kernel); two in flight are held to 32 as well, four get
// the 64 of one block an SM.
constexpr int classifier_blocks_per_sm(int loads, bool bf16_one_read) {
  return loads == 4 ? 1 : (loads == 2 || bf16_one_read) ? 2 : 1;
}

template <class Real, bool kFast, bool kFp8, int kLoads, ClassifierChecks kChecks>
__global__ void LLMC_LAUNCH_BOUNDS(kClassifierBlock, classifier_blocks_per_sm(kLoads, false))
    fused_classifier_kernel(Real* logits, float* losses, const int* targets, int V, int Vp, float dloss,
                            bool write_dlogits, Fp8Sink dlogits_fp8) {
  fused_classifier_row<Real, kFast, false, kFp8, kLoads, kChecks>(logits, losses, targets, V, Vp, dloss,
                                                                  write_dlogits, dlogits_fp8);
}

// Two bf16 rows fit an SM's shared memory: the registers are held to two blocks' worth (32 per
// thread) so that both blocks run at once, but with four vectors in flight (one block then). An fp32
// row fills it alone.
template <class Real, bool kFast, bool kFp8, int kLoads, ClassifierChecks kChecks>
__global__ void LLMC_LAUNCH_BOUNDS(kClassifierBlock, classifier_blocks_per_sm(kLoads, sizeof(Real) == 2))
    fused_classifier_one_read_kernel(Real* logits, float* losses, const int* targets, int V, int Vp, float dloss,
                                     bool write_dlogits, Fp8Sink dlogits_fp8) {
  fused_classifier_row<Real, kFast, true, kFp8, kLoads, kChecks>(logits, losses, targets, V, Vp, dloss,
                                                                 write_dlogits, dlogits_fp8);
}

// The longest row the one-read kernel copies whole into shared memory on this device (the largest
// dynamic shared memory a block may opt in to, less the reduction's stats): 116,096 bf16 or 58,048
// fp32 columns on an H100 (227 KiB), 83,328 or 41,664 on an A100 (163 KiB). Longer rows run the
// two-read kernel. Read once per process: one device per process.
inline int fused_classifier_one_read_max_columns() {
  static const int columns = [] {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    const size_t bytes = prop.sharedMemPerBlockOptin - fused_classifier_shared_bytes(0, true, sizeof(floatX));
    constexpr int S = Packed128<floatX>::size;
    return int(bytes / sizeof(floatX)) / S * S;
  }();
  return columns;
}

// logits: N x Vp (Vp a multiple of 8), overwritten with dlogits when write_dlogits; losses: N
// unscaled cross-entropies. dloss is the gradient of the quantity being minimised with respect to
// each position's loss: loss_scale / (B*T) for a mean over the micro-batch. Every target must lie
// in [0, V): the data loader guarantees it. fast_math: LLMC_FAST_MATH's exponentials. pass:
// LLMC_CLASSIFIER_PASS; one-read runs only where it saves a read (write_dlogits: the losses alone
// read the row once either way) and the row fits (fused_classifier_one_read_max_columns), else
// the two-read kernel runs, with the same results. loads: LLMC_CLASSIFIER_LOADS, and checks:
// LLMC_CLASSIFIER_CHECKS, the same results too. dlogits_fp8 (with write_dlogits; data null: none):
// where the dlogits' FP8 copy goes, N x Vp.
inline void fused_classifier(floatX* logits, float* losses, const int* targets, int N, int V, int Vp, float dloss,
                             bool write_dlogits, FastMath fast_math, cudaStream_t stream, ClassifierPass pass,
                             ClassifierLoads loads, ClassifierChecks checks, const Fp8Sink& dlogits_fp8 = {}) {
  if (Vp % Packed128<floatX>::size != 0 || V > Vp)
    throw std::invalid_argument("fused_classifier: padded vocabulary " + std::to_string(Vp) +
                                " must be a multiple of " + std::to_string(Packed128<floatX>::size) +
                                " and at least the vocabulary " + std::to_string(V));
  const bool one_read =
      pass == ClassifierPass::kOneRead && write_dlogits && Vp <= fused_classifier_one_read_max_columns();
  const size_t shared = fused_classifier_shared_bytes(Vp, one_read, sizeof(floatX));
  const auto launch_kernel = [&](auto fast, auto fp8, auto in_flight, auto checked) {
    constexpr bool kFast = decltype(fast)::value, kFp8 = decltype(fp8)::value;
    constexpr int kLoads = decltype(in_flight)::value;
    constexpr ClassifierChecks kChecks = decltype(checked)::value;
    if (one_read) {
      // The opt-in to more than 48 KiB of dynamic shared memory, once per kernel: the most any row
      // that fits needs.
      static const bool opted_in = [] {
        const size_t most = fused_classifier_shared_bytes(fused_classifier_one_read_max_columns(), true, sizeof(floatX));
        CUDA_CHECK(cudaFuncSetAttribute(
            reinterpret_cast<const void*>(&fused_classifier_one_read_kernel<floatX, kFast, kFp8, kLoads, kChecks>),
            cudaFuncAttributeMaxDynamicSharedMemorySize, int(most)));
        return true;
      }();
      (void)opted_in;
      launch<fused_classifier_one_read_kernel<floatX, kFast, kFp8, kLoads, kChecks>>(
          N, kClassifierBlock, shared, stream, logits, losses, targets, V, Vp, dloss, write_dlogits, dlogits_fp8);
    } else {
      launch<fused_classifier_kernel<floatX, kFast, kFp8, kLoads, kChecks>>(
          N, kClassifierBlock, shared, stream, logits, losses, targets, V, Vp, dloss, write_dlogits, dlogits_fp8);
    }
  };
  const auto with_checks = [&](auto fast, auto fp8, auto in_flight) {
    using C = ClassifierChecks;
    with_value_instance<C::kPerVector, C::kPerColumn>(
        checks, "fused_classifier: LLMC_CLASSIFIER_CHECKS",
        [&](auto checked) { launch_kernel(fast, fp8, in_flight, checked); });
  };
  const auto with_loads = [&](auto fast, auto fp8) {
    using L = ClassifierLoads;
    with_value_instance<L::kOne, L::kTwo, L::kFour>(loads, "fused_classifier: LLMC_CLASSIFIER_LOADS", [&](auto l) {
      with_checks(fast, fp8, std::integral_constant<int, classifier_vectors_in_flight(decltype(l)::value)>{});
    });
  };
  with_fast_math(fast_math, [&](auto fast) {
    if (write_dlogits && dlogits_fp8.data)
      with_loads(fast, std::true_type{});
    else
      with_loads(fast, std::false_type{});
  });
  CUDA_CHECK_LAST();
}

}  // namespace llmc
