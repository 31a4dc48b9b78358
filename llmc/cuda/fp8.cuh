// FP8 operands for the linear layers' GEMMs (--fp8 1, Hopper's FP8 tensor cores): the casts from
// floatX, the amax each cast records, the per-tensor scales, and the weights' FP8 copies.
//
// A tensor x is stored as q = sat(x * s) in E4M3 (activations, weights: 3 mantissa bits, at most
// 448) or E5M2 (gradients: 2 mantissa bits, at most 57344), rounded to nearest even, saturating to
// the largest finite value (__NV_SATFINITE); the GEMM multiplies its product by 1/s of each operand
// (cuBLASLt's A/B scale pointers). s is a power of two, 2^floor(log2(fp8_max / amax)): multiplying by
// it is exact, so the FP8 rounding is the only error, and the largest value lands in
// (fp8_max / 2, fp8_max].
//
// Which amax: the weights' own (current scaling: they are cast once per optimizer step, after a
// reduction over them). Activations and gradients use delayed scaling: the kernel that produces
// the tensor casts it with the scale from the largest amax of the last kFp8History micro-steps and
// records this micro-step's amax as it goes, so the cast costs no extra pass over memory. A value
// above the history's range saturates (the history takes it in at once). The run's first
// micro-step has no history: it calibrates, its GEMMs in floatX while the casts record.
// Docs: docs/cuda-trainer.md, "FP8 matmuls".
#pragma once
#include <cuda_fp8.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "llmc/cuda/common.cuh"
#include "llmc/cuda/fp8_layout.h"
#include "llmc/cuda/reduce.cuh"

namespace llmc {

// Where a kernel writes the FP8 copy of what it produces: data[j] = sat(out[j] * *scale) of the
// floatX value it stores, and the largest |out[j]| into the amax slots (null: not recorded, as in
// an evaluation pass). data null: no copy.
struct Fp8Sink {
  __nv_fp8_storage_t* data = nullptr;
  const float* scale = nullptr;
  unsigned* amax = nullptr;
  __nv_fp8_interpretation_t format = __NV_E4M3;
};

// An FP8 GEMM operand: the values and the device float the GEMM multiplies them by (1/s).
struct Fp8Matrix {
  const __nv_fp8_storage_t* data = nullptr;
  const float* scale_inv = nullptr;
  __nv_fp8_interpretation_t format = __NV_E4M3;
};

__device__ inline __nv_fp8_storage_t fp8_encode(float x, float scale, __nv_fp8_interpretation_t format) {
  return __nv_cvt_float_to_fp8(x * scale, __NV_SATFINITE, format);
}

// The largest |x| into slot `index` % kFp8AmaxSlots of a tensor's amax slots. A NaN is not the
// largest (fmaxf), an infinity is.
__device__ inline void fp8_record_slot(unsigned* amax, float m, long long index) {
  atomicMax(amax + (index % kFp8AmaxSlots) * kFp8AmaxSlotStride, __float_as_uint(m));
}

// The largest |x| over the warp, one atomic per warp; every lane of the warp calls it (blocks of one
// dimension), `warp` its index.
__device__ inline void fp8_record_warp_amax(unsigned* amax, float x, long long warp) {
  const float m = warp_reduce_max(fabsf(x));
  if (threadIdx.x % kWarpSize == 0) fp8_record_slot(amax, m, warp);
}

// The largest |x| over the block, one atomic per block: every thread calls it (blocks of one
// dimension, a multiple of the warp size), with kMaxWarpsPerBlock floats of shared `scratch`.
__device__ inline void fp8_record_block_amax(unsigned* amax, float x, float* scratch) {
  const float m = block_reduce<warp_reduce_max>(fabsf(x), scratch, 0.0f);
  if (threadIdx.x == 0) fp8_record_slot(amax, m, blockIdx.x);
}

// The FP8 copy of one 16-byte vector `v` stored at element `at`; returns max |v[k]| for the amax.
template <class Real>
__device__ inline float fp8_store_vector(const Fp8Sink& sink, size_t at, const Packed128<Real>& v) {
  constexpr int S = Packed128<Real>::size;
  struct alignas(S) Bytes {
    __nv_fp8_storage_t b[S];
  } out;
  const float scale = *sink.scale;
  float m = 0.0f;
#pragma unroll
  for (int k = 0; k < S; ++k) {
    const float x = float(v[k]);
    out.b[k] = fp8_encode(x, scale, sink.format);
    m = fmaxf(m, fabsf(x));
  }
  *reinterpret_cast<Bytes*>(vector_address<S>(sink.data + at)) = out;
  return m;
}

// ---- Standalone cast (the tensors that no kernel of ours produces: the attention output and the
// residual and qkv gradients) ----

template <class Real>
__global__ void fp8_cast_kernel(Fp8Sink sink, const Real* in, size_t n) {
  LLMC_SHARED(float, scratch, [kMaxWarpsPerBlock]);
  constexpr int S = Packed128<Real>::size;
  const size_t i = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) * S;
  float m = 0.0f;
  if (i < n) m = fp8_store_vector(sink, i, load128(in + i));
  if (sink.amax) fp8_record_block_amax(sink.amax, m, scratch);
}

inline void fp8_cast(const Fp8Sink& sink, const floatX* in, size_t n, cudaStream_t stream) {
  require_whole_vectors("fp8_cast", "size", n);
  constexpr int block = 256;
  launch<fp8_cast_kernel<floatX>>(ceil_div(static_cast<long long>(n / Packed128<floatX>::size), block), block, 0,
                                  stream, sink, in, n);
}

// ---- Scales ----

// The largest of a tensor's amax slots (float bits), which it clears for the next recording.
__device__ inline unsigned fp8_take_amax(unsigned* slots) {
  unsigned now = 0;
  for (int s = 0; s < kFp8AmaxSlots; ++s) {
    unsigned& slot = slots[s * kFp8AmaxSlotStride];
    if (slot > now) now = slot;
    slot = 0;
  }
  return now;
}

// 2^floor(log2(fp8_max / amax)), within 2^-126..2^126; `previous` when amax is 0 or not finite
// (nothing seen yet, or a diverged tensor that must not take the scale with it).
__device__ inline float fp8_scale_for(float amax, float fp8_max, float previous) {
  if (!(amax > 0.0f) || !isfinite(amax)) return previous;
  int e = 0;
  frexpf(fp8_max / amax, &e);  // fp8_max / amax = f 2^e, f in [0.5, 1): floor(log2) = e - 1
  return ldexpf(1.0f, max(-126, min(126, e - 1)));
}

// Ends a micro-step for the delayed tensors [0, delayed): each takes its amax slots' largest into
// history entry `entry`, clears them, and its scale becomes fp8_scale_for(the largest of the first
// `filled` entries). The inputs [0, inputs) use E4M3's range, the gradients after them E5M2's. (A template over the
// history's length only so that the header may define it in every translation unit.)
template <int kHistory>
__global__ void fp8_update_delayed_kernel(float* state, int delayed, int inputs, int entry, int filled,
                                          int stale_shift) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= delayed) return;
  const unsigned now = fp8_take_amax(reinterpret_cast<unsigned*>(state + fp8_amax_offset(i)));
  float* history = state + fp8_history_offset(i);
  history[entry] = __uint_as_float(now);
  float amax = 0.0f;
  for (int h = 0; h < filled && h < kHistory; ++h) amax = fmaxf(amax, history[h]);
  const float scale = fp8_scale_for(ldexpf(amax, -stale_shift), i < inputs ? kE4M3Max : kE5M2Max,
                                    state[fp8_scale_offset(i)]);
  state[fp8_scale_offset(i)] = scale;
  state[fp8_scale_inv_offset(i)] = 1.0f / scale;
}

inline void fp8_update_delayed(const Fp8Layout& layout, float* state, int entry, int filled, cudaStream_t stream,
                               int stale_shift = 0) {
  const int delayed = layout.delayed();
  launch<fp8_update_delayed_kernel<kFp8History>>(ceil_div(delayed, 128), 128, 0, stream, state, delayed,
                                                 layout.tensors_per_role(), entry, filled, stale_shift);
}

// ---- Weights: current scaling, then the copies the GEMMs read ----

// Where a tensor of Ws (a linear layer's weights, one W after another, `values` each) records each
// W's amax: `slots` are the first W's amax slots, and the next W's lie kFp8FloatsPerTensor floats
// further on (Fp8Layout gives a linear layer's Ws consecutive tensors). The multi-tensor AdamW
// writes them with LLMC_FP8_WEIGHT_AMAX=adamw (llmc/cuda/adamw.cuh).
struct Fp8WeightAmaxSink {
  unsigned* slots = nullptr;
  size_t values = 0;
};

// The largest |in| of `n` values into the amax slots `amax`.
template <class Real>
__global__ void fp8_amax_kernel(unsigned* amax, const Real* in, size_t n) {
  LLMC_SHARED(float, scratch, [kMaxWarpsPerBlock]);
  constexpr int S = Packed128<Real>::size;
  const size_t i = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) * S;
  float m = 0.0f;
  if (i < n) {
    const Packed128<Real> v = load128(in + i);
#pragma unroll
    for (int k = 0; k < S; ++k) m = fmaxf(m, fabsf(float(v[k])));
  }
  fp8_record_block_amax(amax, m, scratch);
}

// The scale of each weight tensor [first, first + count) from its amax slots, which it clears
// (E4M3; a weight of all zeros keeps scale 1). A template over the format's largest value only so
// that the header may define it in every translation unit.
template <int kFormatMax>
__global__ void fp8_update_current_kernel(float* state, int first, int count) {
  const int i = first + blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= first + count) return;
  const unsigned now = fp8_take_amax(reinterpret_cast<unsigned*>(state + fp8_amax_offset(i)));
  const float scale = fp8_scale_for(__uint_as_float(now), float(kFormatMax), 1.0f);
  state[fp8_scale_offset(i)] = scale;
  state[fp8_scale_inv_offset(i)] = 1.0f / scale;
}

// x (rows x cols, row-major) into x8 (rows x cols; null: not written, where the tensor's producer
// wrote it) and its transpose xt8 (cols x rows), in `format` at *scale, through a 32 x 32 tile in
// shared memory so that both writes are coalesced. Block (32, 8). The tile keeps a word per code (a
// row of 33 words: the transposed reads fall in distinct banks), so that no two threads write parts
// of one shared word, which the emulated GPU's race check, at word granularity, would report.
constexpr int kFp8Tile = 32;
template <class Real>
__global__ void fp8_transposing_cast_kernel(__nv_fp8_storage_t* x8, __nv_fp8_storage_t* xt8, const Real* x,
                                            const float* scale, int rows, int cols,
                                            __nv_fp8_interpretation_t format) {
  LLMC_SHARED(unsigned, tile, [kFp8Tile][kFp8Tile + 1]);
  const float s = *scale;
  const int col = blockIdx.x * kFp8Tile + threadIdx.x;
  for (int r = threadIdx.y; r < kFp8Tile; r += blockDim.y) {
    const int row = blockIdx.y * kFp8Tile + r;
    if (row < rows && col < cols) {
      const __nv_fp8_storage_t q = fp8_encode(float(x[size_t(row) * cols + col]), s, format);
      if (x8) x8[size_t(row) * cols + col] = q;
      tile[r][threadIdx.x] = q;
    }
  }
  __syncthreads();
  // Transposed: this thread writes xt8[c][row] for c = the tile's column r, row = its threadIdx.x.
  const int row = blockIdx.y * kFp8Tile + threadIdx.x;
  for (int r = threadIdx.y; r < kFp8Tile; r += blockDim.y) {
    const int c = blockIdx.x * kFp8Tile + r;
    if (row < rows && c < cols) xt8[size_t(c) * rows + row] = __nv_fp8_storage_t(tile[threadIdx.x][r]);
  }
}

inline void fp8_cast_transposed(__nv_fp8_storage_t* x8, __nv_fp8_storage_t* xt8, const floatX* x, const float* scale,
                                int rows, int cols, __nv_fp8_interpretation_t format, cudaStream_t stream) {
  const dim3 grid(ceil_div(cols, kFp8Tile), ceil_div(rows, kFp8Tile));
  launch<fp8_transposing_cast_kernel<floatX>>(grid, dim3(kFp8Tile, 8), 0, stream, x8, xt8, x, scale, rows, cols,
                                              format);
}

// One E4M3 weight (rows x cols, scaling tensor `tensor`) and where its copies go.
struct Fp8WeightCast {
  const floatX* w;
  int rows, cols;
  int tensor;
  __nv_fp8_storage_t *w8, *wt8;
};

// The weights' copies at their own scales: every amax (unless `amax_recorded`: AdamW recorded
// them, Fp8WeightAmaxSink), then every scale in one launch (their tensors must be the consecutive
// first .. first + count - 1 of the state), then the copies.
inline void fp8_cast_weights(const std::vector<Fp8WeightCast>& weights, float* state, int first, int count,
                             cudaStream_t stream, bool amax_recorded = false) {
  for (const Fp8WeightCast& w : weights) {
    const size_t n = size_t(w.rows) * w.cols;
    require_whole_vectors("fp8_cast_weights", "size", n);
    if (amax_recorded) continue;
    launch<fp8_amax_kernel<floatX>>(ceil_div(static_cast<long long>(n / Packed128<floatX>::size), 256), 256, 0,
                                    stream, reinterpret_cast<unsigned*>(state + fp8_amax_offset(w.tensor)), w.w, n);
  }
  launch<fp8_update_current_kernel<int(kE4M3Max)>>(ceil_div(count, 128), 128, 0, stream, state, first, count);
  for (const Fp8WeightCast& w : weights)
    fp8_cast_transposed(w.w8, w.wt8, w.w, state + fp8_scale_offset(w.tensor), w.rows, w.cols, __NV_E4M3, stream);
}

}  // namespace llmc
