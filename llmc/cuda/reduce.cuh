// Warp and block reductions with a fixed combination order: the same inputs in the same threads
// always give bit-identical results, which the deterministic gradient reductions rely on.
#pragma once
#include "llmc/cuda/common.cuh"

namespace llmc {

constexpr unsigned kFullMask = 0xffffffffu;  // every lane of a warp

// Butterfly reduction: after log2(kWarpSize) xor-shuffles every lane holds the full result.
__device__ inline float warp_reduce_sum(float x) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) x += __shfl_xor_sync(kFullMask, x, offset);
  return x;
}

__device__ inline float warp_reduce_max(float x) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) x = fmaxf(x, __shfl_xor_sync(kFullMask, x, offset));
  return x;
}

// Every thread of the block gets the block-wide result. blockDim.x must be a multiple of kWarpSize
// and at most 1024; `scratch` is kMaxWarpsPerBlock floats of shared memory that the caller may reuse only after a
// __syncthreads() following this call.
template <float (*WarpReduce)(float)>
__device__ inline float block_reduce(float x, float* scratch, float identity) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int num_warps = blockDim.x / kWarpSize;
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
