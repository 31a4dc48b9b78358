// Counter-based randomness for stochastic rounding: the random bits for element `index` depend
// only on (seed, index), so a kernel's output is reproducible whatever the launch shape.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace llmc {

// Integer avalanche hash (xorshift-multiply rounds with constants chosen for low bias): every
// input bit flips each output bit with probability close to 1/2.
__host__ __device__ inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x21f0aaadu;
  x ^= x >> 15;
  x *= 0xd35a2d97u;
  x ^= x >> 15;
  return x;
}

// Random 32 bits for element `index` of the stream named by `seed`. Indices up to 2^64 are
// folded in: the high word goes through its own hash before meeting the low word.
__host__ __device__ inline uint32_t random_u32(uint32_t seed, uint64_t index) {
  uint32_t lo = uint32_t(index);
  uint32_t hi = uint32_t(index >> 32);
  return mix32(lo ^ mix32(hi ^ mix32(seed + 0x9e3779b9u)));
}

// Rounds x to bf16 up or down with probabilities proportional to its distance from the two
// neighbours, so the rounding error is zero in expectation: adding 16 uniform random bits below
// bf16's last mantissa bit and truncating carries into that bit with probability equal to the
// dropped fraction. NaN and infinities keep their value.
__device__ inline __nv_bfloat16 stochastic_round_bf16(float x, uint32_t random_bits) {
  if (!isfinite(x)) return __float2bfloat16_rn(x);
  uint32_t bits = __float_as_uint(x);
  bits += random_bits & 0xffffu;
  bits &= 0xffff0000u;
  return __ushort_as_bfloat16(static_cast<unsigned short>(bits >> 16));
}

// Rounds a fp32 value into the storage type: stochastically for bf16, exactly for fp32.
template <class T>
__device__ inline T stochastic_round(float x, uint32_t random_bits);
template <>
__device__ inline __nv_bfloat16 stochastic_round<__nv_bfloat16>(float x, uint32_t random_bits) {
  return stochastic_round_bf16(x, random_bits);
}
template <>
__device__ inline float stochastic_round<float>(float x, uint32_t) {
  return x;
}

}  // namespace llmc
