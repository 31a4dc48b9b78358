// What the libraries on the emulated GPU (cuBLAS/cuBLASLt in blas_api.cpp, NCCL in nccl_api.cpp)
// need of the emulated runtime (runtime_state.h): its device memory, its streams, its sticky error
// and the device's compute capability, so that library calls are checked, queued and fail the way
// the runtime's own calls do.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

namespace emu {

// Whether [p, p + bytes) lies inside one live device allocation.
bool inside_device_allocation(const void* p, size_t bytes);

// Whether `stream` is the default stream or one created and not yet destroyed.
bool valid_stream(cudaStream_t stream);

// The context's sticky error (cudaSuccess while no kernel or library call has faulted).
cudaError_t context_error();

// A fault on the device outside a kernel (a library's kernel reading past an allocation): printed
// on stderr with `what`, then sticky for every later runtime call, as a GPU context's is.
void library_fault(cudaError_t code, const std::string& what);

// Queues `work` on `stream` in the emulated stream order (stream_order.h), or records it when the
// stream captures (stream_capture.h: the error of a refused capture); once the context has faulted,
// queued work no longer runs, as on a GPU.
[[nodiscard]] cudaError_t device_work(cudaStream_t stream, std::function<void()> work);

// The compute capability cudaGetDeviceProperties reports, major * 10 + minor: 90 (an H100) unless
// LLMC_EMU_COMPUTE_CAPABILITY says otherwise (device_properties.cpp).
int compute_capability();

// Runs `work` with the device allocations that hold any of `pointers` usable until the batch around
// it ends. Under ASan device memory is poisoned for the host otherwise, and every allocation the
// work was not given stays poisoned for it too: work that reaches into one is reported.
void with_device_memory(std::initializer_list<const void*> pointers, const std::function<void()>& work);

// The same for a kernel, given its arguments as it gets them (`bytes` at `args`): the allocations
// that any pointer-sized word of them points into, which takes in the pointers inside structs
// passed by value.
void with_kernel_memory(const void* args, size_t bytes, const std::function<void()>& work);

// While one lives, device memory that work made usable stays usable; it is poisoned again (under
// ASan) when the outermost one ends. The stream scheduler holds one over each run of queued work,
// during which the host waits in the runtime, so that the allocations are poisoned once per wait
// rather than around every launch, and only those that work used (docs/testing.md has what each
// saved).
class DeviceWorkBatch {
 public:
  DeviceWorkBatch();
  ~DeviceWorkBatch();
  DeviceWorkBatch(const DeviceWorkBatch&) = delete;
  DeviceWorkBatch& operator=(const DeviceWorkBatch&) = delete;
};

}  // namespace emu
