// The device functions the project's kernels (and the emulator's tests) call, for the host
// compiler: barriers, warp shuffles and votes, atomics, cache-hinted loads and stores, bit casts and
// arithmetic. Each does what the CUDA programming guide says of it; barriers and warp operations
// suspend the calling CUDA thread (block_runner.h) until the others they wait for arrive. A kernel
// that calls one not here fails to compile in the emulated build: add it here, with a test.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "emulator/runtime/block_runner.h"
#include "emulator/runtime/device_limits.h"

// __syncthreads: every live thread of the block, at the same call site (the emulator's rule; a
// GPU's behaviour is undefined when they differ).
inline void __syncthreads(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  emu::block_barrier(file, line);
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  emu::warp_op(emu::WarpOp::sync, "__syncwarp", mask, 0, 0, emu::kWarp);
}

namespace emu {
// A shuffle moves the bits of a value of up to 8 bytes.
template <class T>
inline uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffles move 4- or 8-byte values");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <class T>
inline T from_bits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}
}  // namespace emu

namespace emu {
template <class T>
inline T shuffle(WarpOp op, const char* name, unsigned mask, T var, int operand, int width) {
  return from_bits<T>(warp_op(op, name, mask, to_bits(var), operand, width));
}
}  // namespace emu

template <class T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = emu::kWarp) {
  return emu::shuffle(emu::WarpOp::shfl_idx, "__shfl_sync", mask, var, src_lane, width);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = emu::kWarp) {
  return emu::shuffle(emu::WarpOp::shfl_xor, "__shfl_xor_sync", mask, var, lane_mask, width);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = emu::kWarp) {
  return emu::shuffle(emu::WarpOp::shfl_down, "__shfl_down_sync", mask, var, int(delta), width);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = emu::kWarp) {
  return emu::shuffle(emu::WarpOp::shfl_up, "__shfl_up_sync", mask, var, int(delta), width);
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return unsigned(emu::warp_op(emu::WarpOp::ballot, "__ballot_sync", mask, predicate != 0, 0, emu::kWarp));
}
inline int __any_sync(unsigned mask, int predicate) {
  return int(emu::warp_op(emu::WarpOp::any, "__any_sync", mask, predicate != 0, 0, emu::kWarp));
}
inline int __all_sync(unsigned mask, int predicate) {
  return int(emu::warp_op(emu::WarpOp::all, "__all_sync", mask, predicate != 0, 0, emu::kWarp));
}

// ---- atomics: relaxed read-modify-writes on global or shared memory, as on the GPU ----
namespace emu {
// *address = update(*address), atomically, on the value's bits (a compare-exchange loop, which
// serves float as well as the integer types); returns the old value.
template <class T, class Update>
inline T atomic_update(T* address, Update update) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomics act on 4- or 8-byte values");
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  check_aligned(address, sizeof(T), "atomic");
  Bits* bits = reinterpret_cast<Bits*>(address);
  Bits old = __atomic_load_n(bits, __ATOMIC_RELAXED);
  for (;;) {
    const Bits desired = Bits(to_bits(update(from_bits<T>(old))));
    if (__atomic_compare_exchange_n(bits, &old, desired, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) break;
  }
  return from_bits<T>(old);
}
}  // namespace emu

template <class T>
inline T atomicAdd(T* address, T value) {
  return emu::atomic_update(address, [&](T old) { return T(old + value); });
}
template <class T>
inline T atomicMax(T* address, T value) {
  return emu::atomic_update(address, [&](T old) { return old > value ? old : value; });
}
template <class T>
inline T atomicExch(T* address, T value) {
  return emu::atomic_update(address, [&](T) { return value; });
}
template <class T>
inline T atomicCAS(T* address, T compare, T value) {
  return emu::atomic_update(address, [&](T old) { return old == compare ? value : old; });
}

// __threadfence: every memory access of the calling thread before it is seen by every thread of the
// device before any access after it (the programming guide's memory fence functions). With the
// relaxed atomics above this gives the guide's last-block pattern its ordering: a block writes its
// results, fences, then counts itself done with an atomic; the block that sees the final count
// fences, then reads everyone's results. On the emulator's worker threads that is a sequentially
// consistent fence, as in the C++ memory model. TSan does not model fences, so under it each fence
// also releases and acquires one device-wide object: that orders a fence after every earlier fence,
// more than a GPU promises (two threads ordered only by a fence on each side, with no atomic
// between, are not reported as a race).
inline void __threadfence() { emu::thread_fence(); }

// ---- cache-hinted loads and stores: on the emulated GPU plain accesses, checked for alignment ----
#define EMU_CACHE_HINTED_LOAD(name)            \
  template <class T>                           \
  inline T name(const T* p) {                  \
    emu::check_aligned(p, alignof(T), "load"); \
    return *p;                                 \
  }
#define EMU_CACHE_HINTED_STORE(name)            \
  template <class T>                            \
  inline void name(T* p, T v) {                 \
    emu::check_aligned(p, alignof(T), "store"); \
    *p = v;                                     \
  }
EMU_CACHE_HINTED_LOAD(__ldg)
EMU_CACHE_HINTED_LOAD(__ldcg)
EMU_CACHE_HINTED_LOAD(__ldcs)
EMU_CACHE_HINTED_STORE(__stcs)
#undef EMU_CACHE_HINTED_LOAD
#undef EMU_CACHE_HINTED_STORE

// ---- bit casts and arithmetic intrinsics ----
// Device code calls isfinite unqualified, as a C name.
using std::isfinite;

inline unsigned __float_as_uint(float x) { return emu::from_bits<unsigned>(emu::to_bits(x)); }
inline float __uint_as_float(unsigned x) { return emu::from_bits<float>(emu::to_bits(x)); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
// The IEEE-rounded intrinsics: each result rounded to nearest even on its own, never fused into an
// FMA with the arithmetic around it. Host float arithmetic is that: the kernels are built with
// -ffp-contract=off (emulator/emulator.mk).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fsub_rn(float a, float b) { return a - b; }

// ---- fast approximate intrinsics (CUDA programming guide, "Intrinsic Functions") ----
// Modelled with the errors their definitions imply, not as exact library calls: a kernel that the
// emulated GPU passes with them sees at least the roundings a GPU makes.
namespace emu {
// ex2.approx.f32, the special function unit's 2^a: 2 ulp at most (the guide's bound for exp2f,
// which is this instruction). Modelled as 2^a rounded to float with one significand bit fewer
// (23 bits instead of 24), an error of up to 1 ulp: coarser than a correctly rounded result,
// within the bound.
inline float ex2_approx(float a) {
  const double exact = std::exp2(double(a));
  if (!std::isfinite(exact) || exact == 0.0) return float(exact);
  int exponent = 0;
  const double significand = std::frexp(exact, &exponent);  // in [0.5, 1)
  return float(std::ldexp(std::nearbyint(std::ldexp(significand, 23)), exponent - 23));
}
// log2(e) in float, as __expf multiplies by it (the emulator's own copy of the constant).
constexpr float kLog2eFloat = 1.44269504088896340736f;
}  // namespace emu

// __expf(x) = ex2.approx(x * log2(e)), the product rounded to float first: the guide's bound,
// 2 + floor(|1.173 x|) ulp, grows with |x| because that rounding is an absolute error of up to
// |x log2 e| 2^-24 in the exponent.
inline float __expf(float x) { return emu::ex2_approx(x * emu::kLog2eFloat); }

// __fdividef(x, y) = x * (1/y), the reciprocal and the product each rounded to float (the guide: 2
// ulp for |y| in [2^-126, 2^126]); for 2^126 < |y| < 2^128 the reciprocal is flushed to 0, so the
// result is 0, or NaN when x is infinite.
inline float __fdividef(float x, float y) {
  const float magnitude = std::fabs(y);
  const float reciprocal = magnitude > 0x1p126f && magnitude < INFINITY ? std::copysign(0.0f, y) : 1.0f / y;
  return x * reciprocal;
}
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
