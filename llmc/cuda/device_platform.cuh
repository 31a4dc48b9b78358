// The GPU the CUDA code is built for, chosen here and in no other product file: NVIDIA's (nvcc,
// with the CUDA toolkit's runtime, cuBLAS(Lt), cuDNN and NCCL), or, with LLMC_CUDA_EMULATOR, the
// emulated one (g++ against emulator/runtime/, which runs the same kernels on the CPU under
// sanitizers: emulator/README.md). The kernels, the backend and the mains are one source for both;
// everything that differs between the two builds is below: the headers, the kernel launch, the
// shared memory declarations, a kernel's launch bounds, the alignment check of 16-byte accesses, whether cuDNN and NCCL exist,
// which GPUs the binary holds code for, and what only the emulated GPU can tell. Other files ask
// LLMC_CUDNN_LIBRARY, LLMC_NCCL_LIBRARY or kEmulatedGpu.
#pragma once
#if defined(LLMC_CUDA_EMULATOR)
#include "emulator/runtime/emulator.h"
#endif
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "llmc/cuda/launch_profile.h"

// cuDNN's header and library exist in the GPU build, unless it was built with USE_CUDNN=0 (the
// Makefile defines LLMC_NO_CUDNN); the emulated GPU does not emulate cuDNN. NCCL exists in both,
// the emulated GPU's being its own (emulator/runtime/nccl_api.cpp), unless the build was made with
// NO_MULTI_GPU=1 (LLMC_NO_NCCL): then nccl.h is never included.
#if !defined(LLMC_CUDA_EMULATOR) && !defined(LLMC_NO_CUDNN)
#define LLMC_CUDNN_LIBRARY 1
#endif
#if !defined(LLMC_NO_NCCL)
#define LLMC_NCCL_LIBRARY 1
#endif

// __launch_bounds__(threads, blocks): the compiler holds a kernel's registers so that `blocks` blocks
// of `threads` fit an SM. Written LLMC_LAUNCH_BOUNDS, which the emulated GPU, with no registers to
// hold, reads as nothing (the toolkit's headers define __launch_bounds__ for nvcc alone).
#if defined(LLMC_CUDA_EMULATOR)
#define LLMC_LAUNCH_BOUNDS(threads, blocks)
#else
#define LLMC_LAUNCH_BOUNDS(threads, blocks) __launch_bounds__(threads, blocks)
#endif

namespace llmc {

// Why a build has no cuDNN attention, or no NCCL, in the words its errors and version line use.
#if defined(LLMC_NO_CUDNN)
inline constexpr const char* kNoCudnnReason = "built with USE_CUDNN=0";
#elif defined(LLMC_CUDA_EMULATOR)
inline constexpr const char* kNoCudnnReason = "the emulated GPU does not emulate cuDNN";
#else
inline constexpr const char* kNoCudnnReason = "cuDNN's attention is the bf16 build's";
#endif
inline constexpr const char* kNoNcclReason = "built with NO_MULTI_GPU=1";

// The GPU code this binary holds, as the build named it: nvcc's code= architectures (the Makefile's
// CUDA_CODES, from CUDA_ARCHS: "sm_80 compute_80 sm_90a"); on the emulated GPU, what it is told the
// binary holds (LLMC_EMU_KERNEL_IMAGES, emulator/runtime/device_properties.cpp).
inline std::string kernel_images() {
#if defined(LLMC_CUDA_EMULATOR)
  return emu::kernel_images();
#elif defined(LLMC_CUDA_CODES)
  return LLMC_CUDA_CODES;
#else
  return "not recorded (built without the Makefile's CUDA_CODES)";
#endif
}

// What cuda_device_emulated and cuda_live_allocation_sizes (llmc/cuda/cuda_backend.h) report.
#if defined(LLMC_CUDA_EMULATOR)
inline constexpr bool kEmulatedGpu = true;
#else
inline constexpr bool kEmulatedGpu = false;
#endif

inline std::optional<std::vector<size_t>> live_device_allocation_sizes() {
#if defined(LLMC_CUDA_EMULATOR)
  return emu::live_allocation_sizes();
#else
  return std::nullopt;
#endif
}

// LLMC_PROFILE=on (llmc/cuda/launch_profile.h): what times the GPU work between begin and end on a
// stream. The backend installs its profiler (llmc/cuda/launch_profiler.cuh) as the active one; with
// none, the default, a TimedRegion costs one load and a branch.
class LaunchTimer {
 public:
  virtual ~LaunchTimer() = default;
  virtual void begin(const std::string& name, cudaStream_t stream) = 0;
  virtual void end(cudaStream_t stream) = 0;
};
inline LaunchTimer*& active_launch_timer() {
  static LaunchTimer* timer = nullptr;
  return timer;
}

// The work queued on `stream` while it lives, timed under `name()` when a timer is active (the name
// is only built then).
class TimedRegion {
 public:
  template <class NameFn>
  TimedRegion(cudaStream_t stream, NameFn&& name) : timer_(active_launch_timer()), stream_(stream) {
    if (timer_) timer_->begin(name(), stream_);
  }
  ~TimedRegion() {
    if (timer_) timer_->end(stream_);
  }
  TimedRegion(const TimedRegion&) = delete;
  TimedRegion& operator=(const TimedRegion&) = delete;

 private:
  LaunchTimer* timer_;
  cudaStream_t stream_;
};

// "layernorm_backward_kernel<__nv_bfloat16>": Kernel's name, parsed once from this function's signature.
template <auto Kernel>
const std::string& kernel_name() {
  static const std::string name = kernel_name_from_signature(__PRETTY_FUNCTION__);
  return name;
}

// kernel<<<grid, block, shared, stream>>>(args...) and the check of its launch, written launch<kernel>(grid, block, shared,
// stream, args...) so that the emulated build, whose compiler has no <<<>>>, runs the same code.
template <auto Kernel, class... Args>
inline void launch(dim3 grid, dim3 block, size_t shared, cudaStream_t stream, Args&&... args) {
  const TimedRegion timed(stream, []() -> const std::string& { return kernel_name<Kernel>(); });
#if defined(LLMC_CUDA_EMULATOR)
  emu::launch<Kernel>(grid, block, shared, stream, std::forward<Args>(args)...);
#else
  Kernel<<<grid, block, shared, stream>>>(std::forward<Args>(args)...);
#endif
  // A launch-configuration error (a bad grid, too much shared memory) now, without synchronising.
  const cudaError_t launched = cudaGetLastError();
  if (launched != cudaSuccess)
    throw std::runtime_error("CUDA error launching " + kernel_name<Kernel>() + ": " + cudaGetErrorString(launched));
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

// A vector access of kBytes (16 unless said) at p: the GPU faults with "misaligned address" unless p
// is kBytes-aligned, and so does the emulated one, whose CPU would not.
template <int kBytes = 16, class P>
__device__ inline P* vector_address(P* p) {
#if defined(LLMC_CUDA_EMULATOR)
  emu::check_aligned(p, kBytes, std::is_const<P>::value ? "load" : "store");
#endif
  return p;
}

}  // namespace llmc
