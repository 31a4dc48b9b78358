// The emulated CUDA runtime's internals, shared by the files of its API (the declarations are the
// toolkit's own cuda_runtime_api.h): device_memory.cpp (allocations, poisoning, copies, fills),
// streams_events.cpp, kernel_launch.cpp, runtime_errors.cpp and device_properties.cpp. Its state is
// one object behind one mutex.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "emulator/runtime/device_limits.h"

namespace emu {

struct Allocation {
  size_t bytes;
  uint64_t serial;    // which cudaMalloc call made it: the order live_allocation_sizes reports
  bool open = false;  // usable by the device's work until the batch ends (device_memory.h)
};

struct State {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> allocations;  // device memory by start address
  uint64_t malloc_calls = 0;
  size_t allocated = 0;
  std::map<uintptr_t, size_t> host_allocations;  // pinned memory (cudaMallocHost): start -> bytes
  std::set<cudaStream_t> streams;
  std::set<cudaEvent_t> events;
  std::map<const void*, int> max_dynamic_shared;  // cudaFuncSetAttribute
  cudaError_t sticky = cudaSuccess;
};
inline State& state() {
  static State* s = new State();  // never destroyed: cudaFree may run from static destructors
  return *s;
}

// Every failing call goes through here: the error is printed with the call that made it, and is
// what cudaGetLastError reports next.
cudaError_t fail(cudaError_t code, const std::string& what);

// The context's sticky error (cudaSuccess until a kernel or library call faults), which then is
// also the last error.
cudaError_t sticky_error();

// The context's first fault stays its error, as a GPU's does.
void make_sticky(cudaError_t code);

// A pointer as the errors print it.
std::string pointer_text(const void* p);

// cudaErrorInvalidResourceHandle, named with `call`, unless `stream` is the default stream or one
// created and not yet destroyed.
cudaError_t check_stream(const char* call, cudaStream_t stream);

// Whether `stream` waits for the legacy default stream's work (not created cudaStreamNonBlocking).
bool stream_blocking(cudaStream_t stream);

// Issues work to `stream`: recorded when it captures (stream_capture.h), queued otherwise; the
// error of a refused capture.
cudaError_t issue_work(cudaStream_t stream, std::function<void()> work);

}  // namespace emu
