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
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
