// AdamW on the GPU, the formula of its CPU oracle llmc/cpu/adamw.h with the gradient clipping fused
// in. p is the fp32 master copy; the floatX parameters the forward pass reads are then written from it
// rounded to nearest. They are a function of the master copy alone, so a checkpoint (which holds
// the master copy) restores them exactly, and every rank's copy of a ZeRO-1 shard is the same. The
// updates far below bf16's resolution accumulate in the master copy. Weight decay is per tensor:
// one launch updates every tensor slice a rank owns, from a table of the slices that says which
// of them decay.
#pragma once
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "llmc/cuda/common.cuh"
#include "llmc/cuda/fp8.cuh"
#include "llmc/optim/optimizer.h"
#include "llmc/optim/registry.h"

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

// Element i of a slice, on its own: works for any n and alignment. Returns |the parameter written|.
template <class Real>
__device__ inline float adamw_element(Real* params, float* master, const Real* grads, float* m, float* v, size_t i,
                                      const AdamWArgs& a) {
  float mi = m[i], vi = v[i];
  const float p = adamw_step(master ? master[i] : float(params[i]), float(grads[i]), mi, vi, a);
  m[i] = mi;
  v[i] = vi;
  if (master) master[i] = p;
  const Real out = Real(p);
  params[i] = out;
  return fabsf(float(out));
}

// Elements i .. i+S-1 of a slice as one 16-byte vector of parameters/gradients, with the fp32
// state as 16-byte vectors too. Returns the largest |parameter written| (a NaN is not the largest).
template <class Real>
__device__ inline float adamw_vector(Real* params, float* master, const Real* grads, float* m, float* v, size_t i,
                                    const AdamWArgs& a) {
  constexpr int S = Packed128<Real>::size;
  constexpr int F = Packed128<float>::size;
  constexpr int H = S / F;  // fp32 vectors per vector of parameters: 2 in bf16, 1 in fp32
  const Packed128<Real> g = load128cs(grads + i);
  // Without a master copy the parameters themselves are the values being updated.
  const Packed128<Real> p_low = master ? Packed128<Real>::zeros() : load128(params + i);
  // Every load of both halves of the state (bf16) before the first store, so that a thread waits
  // for memory once: loading, updating and storing each half in turn waits twice (the compiler keeps
  // that order, since a store to m may be the memory a later load of v reads), which a GPU measured
  // 15% slower (docs/gpu-runs.md, 2026-11-28).
  Packed128<float> mv[H], vv[H], pm[H];
#pragma unroll
  for (int h = 0; h < H; ++h) {
    mv[h] = load128cs(m + i + h * F);
    vv[h] = load128cs(v + i + h * F);
    if (master) pm[h] = load128cs(master + i + h * F);
  }
  Packed128<Real> p_out;
  float largest = 0.0f;
#pragma unroll
  for (int h = 0; h < H; ++h) {
#pragma unroll
    for (int k = 0; k < F; ++k) {
      const int e = h * F + k;
      const float p_old = master ? pm[h][k] : float(p_low[e]);
      pm[h][k] = adamw_step(p_old, float(g[e]), mv[h][k], vv[h][k], a);
      p_out[e] = Real(pm[h][k]);
      largest = fmaxf(largest, fabsf(float(p_out[e])));
    }
    store128cs(m + i + h * F, mv[h]);
    store128cs(v + i + h * F, vv[h]);
    if (master) store128cs(master + i + h * F, pm[h]);
  }
  store128(params + i, p_out);
  return largest;
}

// The multi-tensor launch's table: each slice's place in the parameters and gradients (counted
// from element 0 of those buffers) and in the state (from the owned range's first element, as
// master, m and v are), its length, its first block (the blocks of the slices before it, a prefix
// sum), whether it decays and whether it goes by vectors (adamw_vectorizable), and where the largest
// |parameter written| goes, if anywhere (Fp8WeightAmaxSink). It travels by value, as a kernel
// parameter (4 KiB at most): a rank's owned range is one piece of the flat buffer, so it cuts each
// of the kNumParamTensors tensors at most once, and the table needs no device memory (and no row in
// the memory plan).
struct AdamWSlice {
  size_t param_offset, state_offset, n;
  unsigned first_block;
  bool decay, vector;
  unsigned* amax;      // null, or the FP8 amax slots of the slice's first W (Fp8WeightAmaxSink)
  size_t amax_values;  // values a W
};
constexpr int kAdamWMaxSlices = kNumParamTensors;
struct AdamWSliceTable {
  AdamWSlice slices[kAdamWMaxSlices];
  int count;
  unsigned blocks;  // the grid: every slice's blocks
};
static_assert(sizeof(AdamWSliceTable) + sizeof(AdamWArgs) + 5 * sizeof(void*) <= 4096,
              "a kernel's parameters are at most 4 KiB");

constexpr int kAdamWBlock = 256;  // threads per block

// Every slice of the table in one grid: block b belongs to the last slice whose first block is at
// most b (the slices are few and the table sits in the constant bank, so a linear walk), and then
// updates, as that slice's block b - first, a 16-byte vector a thread (adamw_vector) or, where the
// slice does not go by vectors, an element (adamw_element).
// A slice with amax slots (LLMC_FP8_WEIGHT_AMAX=adamw: a whole tensor of FP8 weights) records its
// Ws' amaxes, the largest |bf16 value written| of each W (Fp8WeightAmaxSink): one atomic per block
// for a block within one W (every block, when a W's values are a multiple of the block's), else
// one per thread. The same values the weights' amax pass would read, so the same amax.
template <class Real>
__global__ void adamw_multi_tensor_kernel(Real* params, float* master, const Real* grads, float* m, float* v,
                                          AdamWSliceTable table, AdamWArgs a) {
  LLMC_SHARED(float, scratch, [kMaxWarpsPerBlock]);
  int s = 0;
  while (s + 1 < table.count && blockIdx.x >= table.slices[s + 1].first_block) ++s;
  const AdamWSlice& slice = table.slices[s];
  if (!slice.decay) a.weight_decay = 0.0f;
  Real* p = params + slice.param_offset;
  const Real* g = grads + slice.param_offset;
  float* pm = master ? master + slice.state_offset : nullptr;
  float* ms = m + slice.state_offset;
  float* vs = v + slice.state_offset;
  const size_t per_thread = slice.vector ? Packed128<Real>::size : 1;
  const size_t t = static_cast<size_t>(blockIdx.x - slice.first_block) * blockDim.x + threadIdx.x;
  const size_t i = t * per_thread;
  float largest = 0.0f;
  if (i < slice.n)
    largest = slice.vector ? adamw_vector(p, pm, g, ms, vs, i, a) : adamw_element(p, pm, g, ms, vs, i, a);
  if (!slice.amax) return;
  const size_t block_first = (t - threadIdx.x) * per_thread, block_end = block_first + blockDim.x * per_thread;
  const size_t first_w = block_first / slice.amax_values;
  if (first_w == ((block_end < slice.n ? block_end : slice.n) - 1) / slice.amax_values)
    fp8_record_block_amax(slice.amax + first_w * kFp8FloatsPerTensor, largest, scratch);
  else if (i < slice.n)
    fp8_record_slot(slice.amax + i / slice.amax_values * kFp8FloatsPerTensor, largest, blockIdx.x);
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

// Whether a slice goes by 16-byte vectors: every pointer aligned and n whole vectors.
inline bool adamw_vectorizable(const OptimizerSlice<floatX>& slice) {
  const uintptr_t addresses = reinterpret_cast<uintptr_t>(slice.params) | reinterpret_cast<uintptr_t>(slice.grads) |
                              reinterpret_cast<uintptr_t>(slice.master) |
                              reinterpret_cast<uintptr_t>(slice.state_at(0)) |
                              reinterpret_cast<uintptr_t>(slice.state_at(1));
  return addresses % 16 == 0 && slice.n % Packed128<floatX>::size == 0;
}

// The blocks of kAdamWBlock threads one slice needs.
inline unsigned adamw_blocks(const OptimizerSlice<floatX>& slice, bool vector) {
  const size_t per_block = size_t(kAdamWBlock) * (vector ? Packed128<floatX>::size : 1);
  return static_cast<unsigned>((slice.n + per_block - 1) / per_block);
}

// One AdamW step over `count` slices in one launch, their state tensors 0 and 1 m and v. The
// slices come from one set of buffers (optimizer_slice of the same `buffers`: the same params,
// grads, master and state bases), each with weight decay either the step's or 0; `base` is that set
// (its n and weight decay unused). base.master may be null, in which case the parameters hold the
// master values themselves (the FP32 build).
// amax: null, or for each slice where its Ws' amaxes go (Fp8WeightAmaxSink; slots null: nowhere).
inline void adamw_update_slices(const OptimizerSlice<floatX>& base, const OptimizerSlice<floatX>* slices, int count,
                                const OptimizerStep& step, const AdamWHyper& hyper, cudaStream_t stream,
                                const Fp8WeightAmaxSink* amax = nullptr) {
  if (count > kAdamWMaxSlices)
    throw std::logic_error("AdamW multi-tensor: " + std::to_string(count) + " slices, more than the table's " +
                           std::to_string(kAdamWMaxSlices));
  AdamWSliceTable table{};
  table.count = count;
  for (int i = 0; i < count; ++i) {
    const OptimizerSlice<floatX>& s = slices[i];
    if (s.weight_decay != 0.0f && s.weight_decay != step.weight_decay)
      throw std::logic_error("AdamW multi-tensor: a slice's weight decay is neither the step's nor 0");
    AdamWSlice& row = table.slices[i];
    row.param_offset = static_cast<size_t>(s.params - base.params);
    row.state_offset = s.state_offset;
    row.n = s.n;
    row.first_block = table.blocks;
    row.decay = s.weight_decay != 0.0f;
    row.vector = adamw_vectorizable(s);
    if (amax && amax[i].slots) {
      if (amax[i].values == 0 || s.n % amax[i].values != 0)
        throw std::logic_error("AdamW multi-tensor: a slice of " + std::to_string(s.n) +
                               " values is not whole Ws of " + std::to_string(amax[i].values) + " for their amaxes");
      row.amax = amax[i].slots;
      row.amax_values = amax[i].values;
      // A thread's vector must lie in one W: otherwise element by element, which gives the same bits.
      if (row.amax_values % Packed128<floatX>::size != 0) row.vector = false;
    }
    table.blocks += adamw_blocks(s, row.vector);
  }
  if (table.blocks == 0) return;
  const AdamWArgs a = adamw_args(step, hyper, step.weight_decay);
  launch<adamw_multi_tensor_kernel<floatX>>(static_cast<int>(table.blocks), kAdamWBlock, 0, stream, base.params,
                                            base.master, base.grads, base.state_at(0), base.state_at(1), table, a);
}

// The CUDA backend's AdamW (run_optimizer_step, llmc/optim/registry.h).
inline void optimizer_update_slices(AdamW, const OptimizerSlice<floatX>& buffers, const OptimizerSlice<floatX>* slices,
                                    int count, const OptimizerStep& step, cudaStream_t stream,
                                    const Fp8WeightAmaxSink* amax) {
  adamw_update_slices(buffers, slices, count, step, AdamW::kHyper, stream, amax);
}

}  // namespace llmc
