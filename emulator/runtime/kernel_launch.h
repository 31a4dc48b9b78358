// Launching a kernel on the emulated GPU (llmc::launch in llmc/cuda/device_platform.cuh calls this
// where the nvcc build writes kernel<<<grid, block, shared, stream>>>(args...)): the launch
// configuration is checked as the CUDA runtime checks it, then the kernel is queued on its stream
// (stream_order.h); when it runs, every block runs (block_runner.h).
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "emulator/runtime/block_runner.h"

namespace emu {

// The launch-time checks and the run; returns the error cudaGetLastError then reports. `args`
// holds `args_bytes` bytes: the device memory the kernel may use is what they point into.
cudaError_t launch_kernel(const void* kernel, const char* name, dim3 grid, dim3 block, size_t shared,
                          cudaStream_t stream, void (*invoke)(const void*), std::shared_ptr<const void> args,
                          size_t args_bytes);

// "llmc::foo_kernel<__nv_bfloat16>" from this function's signature, as GCC prints it.
template <auto Kernel>
const char* kernel_name() {
  static const std::string name = [](const std::string& pretty) {
    const std::string key = "Kernel = ";
    size_t begin = pretty.find(key);
    if (begin == std::string::npos) return pretty;
    begin += key.size();
    size_t end = pretty.find_first_of(";]", begin);
    return pretty.substr(begin, end - begin);
  }(__PRETTY_FUNCTION__);
  return name.c_str();
}

template <auto Kernel, class... Params>
void invoke_kernel(const void* args) {
  std::apply(Kernel, *static_cast<const std::tuple<Params...>*>(args));
}

template <auto Kernel, class... Params, class... Args>
void launch_with(void (*)(Params...), dim3 grid, dim3 block, size_t shared, cudaStream_t stream, Args&&... args) {
  // The arguments as the kernel's parameter types, copied when the kernel is launched, as the
  // runtime copies them: each CUDA thread gets them by value when the kernel runs.
  auto converted = std::make_shared<const std::tuple<std::decay_t<Params>...>>(std::forward<Args>(args)...);
  launch_kernel(reinterpret_cast<const void*>(Kernel), kernel_name<Kernel>(), grid, block, shared, stream,
                &invoke_kernel<Kernel, std::decay_t<Params>...>, std::move(converted), sizeof(*converted));
}

template <auto Kernel, class... Args>
void launch(dim3 grid, dim3 block, size_t shared, cudaStream_t stream, Args&&... args) {
  launch_with<Kernel>(Kernel, grid, block, shared, stream, std::forward<Args>(args)...);
}

}  // namespace emu
