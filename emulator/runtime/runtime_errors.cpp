// Errors of the emulated CUDA runtime: each failing call prints what failed and becomes the last
// error; a fault in a kernel or a library call is sticky, returned by every later call, as a GPU
// context's is. Also the runtime's names and wording for each error code.
#include <cuda_runtime.h>

#include <cstdio>
#include <mutex>
#include <string>

#include "emulator/runtime/device_memory.h"
#include "emulator/runtime/runtime_state.h"

namespace emu {

namespace {
// What cudaGetLastError reports next, per host thread.
thread_local cudaError_t last_error = cudaSuccess;
}  // namespace

cudaError_t fail(cudaError_t code, const std::string& what) {
  std::fprintf(stderr, "emulated GPU: %s (%s)\n", what.c_str(), cudaGetErrorString(code));
  last_error = code;
  return code;
}

cudaError_t sticky_error() {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().sticky != cudaSuccess) last_error = state().sticky;
  return state().sticky;
}

void make_sticky(cudaError_t code) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().sticky == cudaSuccess) state().sticky = code;
  last_error = state().sticky;
}

std::string pointer_text(const void* p) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", p);
  return text;
}

cudaError_t context_error() { return sticky_error(); }

void library_fault(cudaError_t code, const std::string& what) {
  fail(code, what);
  make_sticky(code);
}

}  // namespace emu

using namespace emu;

extern "C" {

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = last_error;
  std::lock_guard<std::mutex> lock(state().mutex);
  last_error = state().sticky;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_error; }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidMemcpyDirection:
      return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorMisalignedAddress:
      return "cudaErrorMisalignedAddress";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorNoKernelImageForDevice:
      return "cudaErrorNoKernelImageForDevice";
    case cudaErrorInvalidDeviceFunction:
      return "cudaErrorInvalidDeviceFunction";
    case cudaErrorIllegalState:
      return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported:
      return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated:
      return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureMerge:
      return "cudaErrorStreamCaptureMerge";
    case cudaErrorStreamCaptureUnmatched:
      return "cudaErrorStreamCaptureUnmatched";
    case cudaErrorStreamCaptureUnjoined:
      return "cudaErrorStreamCaptureUnjoined";
    case cudaErrorStreamCaptureIsolation:
      return "cudaErrorStreamCaptureIsolation";
    case cudaErrorStreamCaptureImplicit:
      return "cudaErrorStreamCaptureImplicit";
    case cudaErrorCapturedEvent:
      return "cudaErrorCapturedEvent";
    case cudaErrorStreamCaptureWrongThread:
      return "cudaErrorStreamCaptureWrongThread";
    default:
      return "cudaErrorUnknown";
  }
}

// The runtime's own wording for each error.
const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidMemcpyDirection:
      return "invalid copy direction for memcpy";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorMisalignedAddress:
      return "misaligned address";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorNoKernelImageForDevice:
      return "no kernel image is available for execution on the device";
    case cudaErrorInvalidDeviceFunction:
      return "invalid device function";
    case cudaErrorIllegalState:
      return "the operation cannot be performed in the present state";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureMerge:
      return "operation would result in a merge of separate capture sequences";
    case cudaErrorStreamCaptureUnmatched:
      return "capture was not ended in the same stream as it began";
    case cudaErrorStreamCaptureUnjoined:
      return "capturing stream has unjoined work";
    case cudaErrorStreamCaptureIsolation:
      return "dependency created on uncaptured work in another stream";
    case cudaErrorStreamCaptureImplicit:
      return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorCapturedEvent:
      return "operation not permitted on an event last recorded in a capturing stream";
    case cudaErrorStreamCaptureWrongThread:
      return "attempt to terminate a thread-local capture sequence from another thread";
    default:
      return "unknown error";
  }
}

}  // extern "C"
