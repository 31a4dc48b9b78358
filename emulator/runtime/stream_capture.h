// Stream capture on the emulated GPU (docs/cuda-emulator.md, "Graphs"): while a stream captures,
// the work issued to it is recorded into a graph instead of being queued; cudaGraphLaunch queues the
// recorded work again, in an order its dependencies allow, on the launch stream. What CUDA refuses
// while a capture is under way (a host wait on captured work, a potentially unsafe call under the
// global mode, the legacy stream beside a capturing blocking stream) fails with CUDA's error code
// and invalidates the capture, as CUDA does; cudaStreamEndCapture then returns
// cudaErrorStreamCaptureInvalidated and no graph.
//
// The runtime's calls (streams_events.cpp, device_memory.cpp, stream_order.cpp) ask here first. A
// hook that returns std::nullopt leaves the call to its uncaptured path; a value is the call's
// result: the work was recorded (cudaSuccess), or refused.
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <optional>

namespace emu {

// Queued work: recorded when `stream` captures, refused on the legacy stream while a blocking
// stream captures (cudaErrorStreamCaptureImplicit) or on an invalidated capture.
std::optional<cudaError_t> capture_work(cudaStream_t stream, std::function<void()>& work);
// cudaEventRecord: on a capturing stream the event stands for the work captured so far; on any
// other stream it is an ordinary event again.
std::optional<cudaError_t> capture_record(cudaEvent_t event, cudaStream_t stream);
// cudaStreamWaitEvent: a captured event joins `stream` to its capture (a fork, or a join back);
// an event from outside the capture is refused (cudaErrorStreamCaptureIsolation) unless `flags`
// has cudaEventWaitExternal, which records a wait for it at each launch.
std::optional<cudaError_t> capture_wait(cudaStream_t stream, cudaEvent_t event, unsigned flags);
// A wait inside the runtime (a library whose host waits for its work): on a capturing stream the
// captured work then runs when the graph is launched. True when `stream` captures.
bool capture_host_waits(cudaStream_t stream);
bool stream_capturing(cudaStream_t stream);

// cudaSuccess, or the refusal of a host wait: on a capturing stream, cudaStreamSynchronize and
// cudaStreamQuery (cudaErrorStreamCaptureUnsupported); on an event last recorded in a capture,
// cudaEventSynchronize and cudaEventQuery (cudaErrorCapturedEvent); cudaDeviceSynchronize while any
// stream captures (cudaErrorStreamCaptureUnsupported). `call` names the call in the report.
cudaError_t capture_allows_stream_wait(const char* call, cudaStream_t stream);
cudaError_t capture_allows_event_wait(const char* call, cudaEvent_t event);
cudaError_t capture_allows_device_wait(const char* call);
// A potentially unsafe call (cudaMalloc, cudaFree, a synchronous cudaMemcpy or cudaMemset), refused
// by the calling thread's capture interaction mode (cudaThreadExchangeStreamCaptureMode).
cudaError_t capture_allows_unsafe_call(const char* call);

void capture_event_destroyed(cudaEvent_t event);

}  // namespace emu
