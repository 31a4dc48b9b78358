// Sum of squares of a gradient buffer (the global norm before clipping is its square root),
// deterministic: a grid of blocks accumulates grid-stride slices into per-block fp32 partials, then
// one block adds kGlobalNormBlocks partials in a fixed order. Nothing here synchronises with the
// host; the caller reads the value when it needs it.
#pragma once
#include <algorithm>
#include "llmc/cuda/common.cuh"
#include "llmc/cuda/kernel_scratch.h"
#include "llmc/cuda/reduce.cuh"

namespace llmc {

// The grid (at most kGlobalNormBlocks, kernel_scratch.h) never depends on the device, so the result
// is the same on any GPU for the same input.
constexpr int kGlobalNormThreads = 512;

// Blocks for n values of T: kGlobalNormBlocks, or fewer where they would have no vector to read
// (a buffer under 2^19 vectors). The blocks left out would each add a partial of +0.0, and adding
// +0.0 to a sum of squares changes no bit: the result is the same as the full grid's.
template <class T>
inline int global_norm_blocks(size_t n) {
  const long long vectors = static_cast<long long>(n / Packed128<T>::size);
  return std::clamp(ceil_div(vectors, kGlobalNormThreads), 1, kGlobalNormBlocks);
}

// partials[blockIdx] = this block's sum of squares over its grid-stride 16-byte vectors. values
// must be 16-byte aligned when n >= 16 / sizeof(T); the n % (16 / sizeof(T)) trailing elements are
// summed by block 0.
template <class T>
__global__ void global_norm_partial_kernel(float* partials, const T* values, size_t n) {
  constexpr int S = Packed128<T>::size;
  LLMC_SHARED(float, scratch, [kMaxWarpsPerBlock]);
  const size_t vectors = n / S;
  float sum = 0.0f;
  for (size_t v = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < vectors;
       v += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const Packed128<T> x = load128cs(values + v * S);
#pragma unroll
    for (int k = 0; k < S; ++k) {
      const float f = float(x[k]);
      sum += f * f;
    }
  }
  const size_t tail = vectors * S + static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (blockIdx.x == 0 && tail < n) {
    const float f = float(values[tail]);
    sum += f * f;
  }
  sum = block_reduce_sum(sum, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// out[0] = the sum of the first `blocks` partials and kGlobalNormBlocks - blocks zeros, in the
// same order whatever `blocks` is; one block of kCount = kGlobalNormBlocks threads.
template <int kCount>
__global__ void global_norm_finish_kernel(float* out, const float* partials, int blocks) {
  LLMC_SHARED(float, scratch, [kMaxWarpsPerBlock]);
  const float total = block_reduce_sum(static_cast<int>(threadIdx.x) < blocks ? partials[threadIdx.x] : 0.0f, scratch);
  if (threadIdx.x == 0) out[0] = total;
}

inline void global_norm_squared_finish(float* out, const float* partials, int blocks, cudaStream_t stream) {
  launch<global_norm_finish_kernel<kGlobalNormBlocks>>(1, kGlobalNormBlocks, 0, stream, out, partials, blocks);
}

// out[0] = sum of values[i]^2 (fp32 on the device). partials: kGlobalNormBlocks floats of scratch.
template <class T>
inline void global_norm_squared(float* out, float* partials, const T* values, size_t n, cudaStream_t stream) {
  const int blocks = global_norm_blocks<T>(n);
  launch<global_norm_partial_kernel<T>>(blocks, kGlobalNormThreads, 0, stream, partials, values, n);
  global_norm_squared_finish(out, partials, blocks, stream);
}

}  // namespace llmc
