// Shared CUDA plumbing: the training precision, error checks, kernel launches, shared memory and
// 128-bit vectors. With LLMC_CUDA_EMULATOR the same code compiles with g++ against the emulated GPU
// (emulator/runtime/, docs/cuda-emulator.md); the few lines that differ between the two builds
// are the #if blocks of this file.
#pragma once
#if defined(LLMC_CUDA_EMULATOR)
#include "emulator/runtime/emulator.h"
#endif
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace llmc {

// Activations and parameters are bf16 in the default build and fp32 with PRECISION=FP32 (which
// defines ENABLE_FP32); master weights, AdamW moments, losses and norms are always fp32.
#if defined(ENABLE_FP32)
using floatX = float;
#else
using floatX = __nv_bfloat16;
#endif

// cuDNN's fused attention exists in the GPU build in bf16 (llmc/cuda/cudnn_attention.h). The FP32
// build and the emulated GPU, which does not emulate cuDNN, have only the plain attention kernels.
#if !defined(ENABLE_FP32) && !defined(LLMC_CUDA_EMULATOR)
#define LLMC_CUDNN 1
#endif

// floatX as a cuBLAS / cuBLASLt data type.
inline cudaDataType_t floatX_cuda_type() {
  return std::is_same<floatX, float>::value ? CUDA_R_32F : CUDA_R_16BF;
}

inline void cuda_check(cudaError_t err, const char* file, int line) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("CUDA error at ") + file + ":" + std::to_string(line) +
                             ": " + cudaGetErrorString(err));
}
#define CUDA_CHECK(call) ::llmc::cuda_check((call), __FILE__, __LINE__)
// After a kernel launch: reports launch-configuration errors without synchronising.
#define CUDA_CHECK_LAST() ::llmc::cuda_check(cudaGetLastError(), __FILE__, __LINE__)

// kernel<<<grid, block, shared, stream>>>(args...), written launch<kernel>(grid, block, shared,
// stream, args...) so that the emulated build, whose compiler has no <<<>>>, runs the same code.
template <auto Kernel, class... Args>
inline void launch(dim3 grid, dim3 block, size_t shared, cudaStream_t stream, Args&&... args) {
#if defined(LLMC_CUDA_EMULATOR)
  emu::launch<Kernel>(grid, block, shared, stream, std::forward<Args>(args)...);
#else
  Kernel<<<grid, block, shared, stream>>>(std::forward<Args>(args)...);
#endif
}

// Shared memory, declared the same way for both builds. A static array of the block:
//   LLMC_SHARED(float, sums, [8][256]);   is   __shared__ float sums[8][256];
// and the dynamic part (the launch's `shared` bytes, 16-byte aligned) as T*: dynamic_shared<T>().
#if defined(LLMC_CUDA_EMULATOR)
#define LLMC_SHARED(type, name, dims)      \
  using name##_shared_type = type dims;    \
  static const char name##_shared_tag = 0; \
  name##_shared_type& name =               \
      *static_cast<name##_shared_type*>(::emu::static_shared(&name##_shared_tag, sizeof(name##_shared_type)))
template <class T>
inline T* dynamic_shared() {
  return static_cast<T*>(::emu::dynamic_shared());
}
#else
#define LLMC_SHARED(type, name, dims) __shared__ type name dims
template <class T>
__device__ inline T* dynamic_shared() {
  extern __shared__ __align__(16) unsigned char llmc_dynamic_shared_memory[];
  return reinterpret_cast<T*>(llmc_dynamic_shared_memory);
}
#endif

// A 16-byte vector access at p: the GPU faults with "misaligned address" unless p is 16-byte
// aligned, and so does the emulated one, whose CPU would not.
template <class P>
__device__ inline P* vector_address(P* p) {
#if defined(LLMC_CUDA_EMULATOR)
  emu::check_aligned(p, 16, std::is_const<P>::value ? "load" : "store");
#endif
  return p;
}

// 16 bytes of T, loaded and stored as one vector instruction. Pointers must be 16-byte aligned,
// which holds for every tensor here because all sizes are multiples of 8 elements.
template <class T>
struct alignas(16) Packed128 {
  static constexpr int size = 16 / sizeof(T);
  T payload[size];

  __device__ static Packed128 zeros() {
    Packed128 p;
#pragma unroll
    for (int k = 0; k < size; ++k) p.payload[k] = T(0.0f);
    return p;
  }
  __device__ T& operator[](int k) { return payload[k]; }
  __device__ const T& operator[](int k) const { return payload[k]; }
};

// Plain 128-bit load/store.
template <class T>
__device__ inline Packed128<T> load128(const T* p) {
  return *reinterpret_cast<const Packed128<T>*>(vector_address(p));
}
template <class T>
__device__ inline void store128(T* p, Packed128<T> v) {
  *reinterpret_cast<Packed128<T>*>(vector_address(p)) = v;
}
// Streaming variants: data read or written once, kept out of the way of reused data in L2.
template <class T>
__device__ inline Packed128<T> load128cs(const T* p) {
  int4 raw = __ldcs(reinterpret_cast<const int4*>(p));
  return *reinterpret_cast<Packed128<T>*>(&raw);
}
template <class T>
__device__ inline void store128cs(T* p, Packed128<T> v) {
  __stcs(reinterpret_cast<int4*>(p), *reinterpret_cast<int4*>(&v));
}

// Kernels that move 16-byte vectors need counts that split into whole vectors; `what` names the
// count in the error (e.g. "channels").
inline void require_whole_vectors(const char* who, const char* what, size_t count) {
  if (count % Packed128<floatX>::size != 0)
    throw std::invalid_argument(std::string(who) + ": " + what + " " + std::to_string(count) +
                                " is not a multiple of " + std::to_string(Packed128<floatX>::size));
}

inline int ceil_div(long long a, long long b) { return int((a + b - 1) / b); }

}  // namespace llmc
