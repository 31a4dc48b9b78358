// Streams and events on the emulated GPU: their handles, checked on every call, and the calls that
// queue work, record, wait and query, in the order stream_order.h keeps, or record them into a
// graph while the stream captures (stream_capture.h). Queued work no longer runs once the context
// has faulted, as on a GPU.
#include <cuda_runtime.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "emulator/runtime/device_memory.h"
#include "emulator/runtime/runtime_state.h"
#include "emulator/runtime/stream_capture.h"
#include "emulator/runtime/stream_order.h"

struct CUstream_st {
  unsigned flags;
};
struct CUevent_st {
  unsigned flags;
  bool recorded;  // a record has run
  bool pending;   // a record is queued and has not run yet
  std::chrono::steady_clock::time_point when;
};

namespace emu {
namespace {

bool context_failed() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().sticky != cudaSuccess;
}

cudaError_t check_event(const char* call, cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!state().events.count(event))
    return fail(cudaErrorInvalidResourceHandle,
                std::string(call) + ": event " + pointer_text(event) + " was not created or is destroyed");
  return cudaSuccess;
}

}  // namespace

cudaError_t issue_work(cudaStream_t stream, std::function<void()> work) {
  if (std::optional<cudaError_t> captured = capture_work(stream, work)) return *captured;
  enqueue(stream, std::move(work));
  return cudaSuccess;
}

cudaError_t device_work(cudaStream_t stream, std::function<void()> work) {
  return issue_work(stream, [work = std::move(work)] {
    if (!context_failed()) work();
  });
}

bool stream_blocking(cudaStream_t stream) {
  if (stream == nullptr) return true;
  return (stream->flags & cudaStreamNonBlocking) == 0;
}

bool valid_stream(cudaStream_t stream) {
  if (stream == nullptr) return true;
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().streams.count(stream) != 0;
}

cudaError_t check_stream(const char* call, cudaStream_t stream) {
  if (!valid_stream(stream))
    return fail(cudaErrorInvalidResourceHandle,
                std::string(call) + ": stream " + pointer_text(stream) + " was not created or is destroyed");
  return cudaSuccess;
}

}  // namespace emu

using namespace emu;

extern "C" {

// The scheduler's lock is never taken under the state's (queued work takes the state's).
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  *stream = new CUstream_st{flags};
  stream_created(*stream, (flags & cudaStreamNonBlocking) == 0);
  std::lock_guard<std::mutex> lock(state().mutex);
  state().streams.insert(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (cudaError_t e = check_stream("cudaStreamDestroy", stream)) return e;
  if (!stream) return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: the default stream");
  stream_destroyed(stream);
  std::lock_guard<std::mutex> lock(state().mutex);
  state().streams.erase(stream);
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (cudaError_t e = check_stream("cudaStreamSynchronize", stream)) return e;
  if (cudaError_t e = capture_allows_stream_wait("cudaStreamSynchronize", stream)) return e;
  finish_stream(stream);
  return sticky_error();
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (cudaError_t e = check_stream("cudaStreamQuery", stream)) return e;
  if (cudaError_t e = capture_allows_stream_wait("cudaStreamQuery", stream)) return e;
  const bool idle = stream_idle(stream);
  if (cudaError_t e = sticky_error()) return e;
  return idle ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  if (cudaError_t e = check_stream("cudaStreamWaitEvent", stream)) return e;
  if (cudaError_t e = check_event("cudaStreamWaitEvent", event)) return e;
  if (std::optional<cudaError_t> captured = capture_wait(stream, event, flags)) return *captured;
  wait_event(stream, event);
  return sticky_error();
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  std::lock_guard<std::mutex> lock(state().mutex);
  *event = new CUevent_st{flags, false, false, {}};
  state().events.insert(*event);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (cudaError_t e = check_event("cudaEventDestroy", event)) return e;
  capture_event_destroyed(event);
  event_destroyed(event);
  std::lock_guard<std::mutex> lock(state().mutex);
  state().events.erase(event);
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (cudaError_t e = check_event("cudaEventRecord", event)) return e;
  if (cudaError_t e = check_stream("cudaEventRecord", stream)) return e;
  if (std::optional<cudaError_t> captured = capture_record(event, stream)) return *captured;
  event->pending = true;
  record_event(event, stream, [event] {
    event->recorded = true;
    event->pending = false;
    event->when = std::chrono::steady_clock::now();
  });
  return sticky_error();
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (cudaError_t e = check_event("cudaEventSynchronize", event)) return e;
  if (cudaError_t e = capture_allows_event_wait("cudaEventSynchronize", event)) return e;
  finish_event(event);
  return sticky_error();
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (cudaError_t e = check_event("cudaEventQuery", event)) return e;
  if (cudaError_t e = capture_allows_event_wait("cudaEventQuery", event)) return e;
  const bool done = event_done(event);
  if (cudaError_t e = sticky_error()) return e;
  return done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (cudaError_t e = check_event("cudaEventElapsedTime", start)) return e;
  if (cudaError_t e = check_event("cudaEventElapsedTime", end)) return e;
  if ((start->flags | end->flags) & cudaEventDisableTiming)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event created with cudaEventDisableTiming");
  if (start->pending || end->pending) return cudaErrorNotReady;
  if (!start->recorded || !end->recorded)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event that was never recorded");
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return sticky_error();
}

cudaError_t cudaDeviceSynchronize(void) {
  if (cudaError_t e = capture_allows_device_wait("cudaDeviceSynchronize")) return e;
  finish_all();
  return sticky_error();
}

}  // extern "C"
