// Warp and block reductions with a fixed combination order: the same inputs in the same threads
// always give bit-identical results, which the deterministic gradient reductions rely on.
#pragma once
#include <cuda_runtime.h>

namespace llmc {

constexpr unsigned kFullMask = 0xffffffffu;

// Butterfly reduction: after log2(32) xor-shuffles every lane holds the full result.
__device__ inline float warp_reduce_sum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(kFullMask, x, offset);
  return x;
}

__device__ inline float warp_reduce_max(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x = fmaxf(x, __shfl_xor_sync(kFullMask, x, offset));
  return x;
}

// Every thread of the block gets the block-wide result. blockDim.x must be a multiple of 32 and
// at most 1024; `scratch` is 32 floats of shared memory that the caller may reuse only after a
// __syncthreads() following this call.
template <float (*WarpReduce)(float)>
__device__ inline float block_reduce(float x, float* scratch, float identity) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int num_warps = blockDim.x / 32;
  x = WarpReduce(x);
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  x = lane < num_warps ? scratch[lane] : identity;
  return WarpReduce(x);
}

__device__ inline float block_reduce_sum(float x, float* scratch) {
  return block_reduce<warp_reduce_sum>(x, scratch, 0.0f);
}

}  // namespace llmc
