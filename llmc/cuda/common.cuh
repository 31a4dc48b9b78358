// Shared CUDA plumbing: the training precision, the warp size, error checks and 128-bit vectors. What differs
// between the GPU build and the emulated GPU (kernel launches, shared memory, the headers) is
// llmc/cuda/device_platform.cuh's.
#pragma once
#include <stdexcept>
#include <string>
#include <type_traits>

#include "llmc/cuda/device_platform.cuh"

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
#if !defined(ENABLE_FP32) && defined(LLMC_CUDNN_LIBRARY)
#define LLMC_CUDNN 1
#endif

// Threads per warp on every NVIDIA GPU; the kernels' lane and warp arithmetic and shuffles assume it.
constexpr int kWarpSize = 32;
// Warps in the largest block (1024 threads): the length of a block reduction's shared scratch.
constexpr int kMaxWarpsPerBlock = 1024 / kWarpSize;

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
