// Launching a kernel on the emulated GPU (kernel_launch.h): the configuration checked as the CUDA
// runtime checks it, against the device's limits and the kernel's dynamic shared memory allowance
// (cudaFuncSetAttribute), then the kernel queued on its stream; a fault while it runs is sticky.
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "emulator/runtime/block_runner.h"
#include "emulator/runtime/device_memory.h"
#include "emulator/runtime/kernel_launch.h"
#include "emulator/runtime/runtime_state.h"

namespace emu {

cudaError_t launch_kernel(const void* kernel, const char* name, dim3 grid, dim3 block, size_t shared,
                          cudaStream_t stream, void (*invoke)(const void*), std::shared_ptr<const void> args,
                          size_t args_bytes) {
  if (cudaError_t e = sticky_error()) return e;
  const std::string launch =
      std::string("launch of ") + name + " with grid " + dim_text(grid) + ", block " + dim_text(block);
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  if (block.x == 0 || block.y == 0 || block.z == 0 || block.x > kMaxBlockDim[0] || block.y > kMaxBlockDim[1] ||
      block.z > kMaxBlockDim[2] || threads > kMaxThreadsPerBlock)
    return fail(cudaErrorInvalidConfiguration, launch + ": a block holds at most " +
                                                   std::to_string(kMaxThreadsPerBlock) + " threads, at most " +
                                                   limits_text(kMaxBlockDim) + " in each dimension");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > kMaxGridDim[0] || grid.y > kMaxGridDim[1] ||
      grid.z > kMaxGridDim[2])
    return fail(cudaErrorInvalidConfiguration, launch + ": a grid is at most " + limits_text(kMaxGridDim) + " blocks");
  if (cudaError_t e = check_stream(name, stream)) return e;
  size_t limit = kDefaultSharedPerBlock;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    auto it = state().max_dynamic_shared.find(kernel);
    if (it != state().max_dynamic_shared.end()) limit = std::max(limit, size_t(it->second));
  }
  if (shared > limit)
    return fail(cudaErrorInvalidValue,
                launch + ": " + std::to_string(shared) + " bytes of dynamic shared memory, over the " +
                    std::to_string(limit) + " allowed" +
                    (limit == kDefaultSharedPerBlock
                         ? " without cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize)"
                         : " by cudaFuncSetAttribute"));
  const size_t total_limit = limit == kDefaultSharedPerBlock ? kDefaultSharedPerBlock : kOptInSharedPerBlock;
  return device_work(stream, [=, args = std::move(args)] {
    cudaError_t result = cudaSuccess;
    with_kernel_memory(args.get(), args_bytes, [&] {
      result = run_kernel(KernelJob{name, grid, block, shared, total_limit, invoke, args.get()});
    });
    if (result != cudaSuccess) make_sticky(result);
  });
}

}  // namespace emu

using namespace emu;

extern "C" {

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
    return fail(cudaErrorInvalidValue,
                "cudaFuncSetAttribute: only cudaFuncAttributeMaxDynamicSharedMemorySize is emulated");
  if (value < 0 || size_t(value) > kOptInSharedPerBlock)
    return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: " + std::to_string(value) +
                                           " bytes of dynamic shared memory, over the device's " +
                                           std::to_string(kOptInSharedPerBlock));
  std::lock_guard<std::mutex> lock(state().mutex);
  state().max_dynamic_shared[func] = value;
  return cudaSuccess;
}

}  // extern "C"
