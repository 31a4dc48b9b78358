// Stream capture on the emulated GPU (stream_capture.h). A capture sequence holds the graph being
// recorded and, for each stream that takes part (the origin, and every stream forked from it by an
// event wait), the nodes its next work depends on. Events recorded on a capturing stream stand for
// such a set of nodes until they are recorded again outside a capture.
#include "emulator/runtime/stream_capture.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "emulator/runtime/graph.h"
#include "emulator/runtime/runtime_state.h"

namespace emu {
namespace {

struct Capture {
  uint64_t id;
  cudaStream_t origin;
  cudaStreamCaptureMode mode;
  std::thread::id thread;  // the thread that began it
  bool invalidated = false;
  std::unique_ptr<CUgraph_st> graph = std::make_unique<CUgraph_st>();
  std::map<cudaStream_t, std::vector<size_t>> tails;  // each member stream: what its next node depends on
};

std::mutex capture_mutex;
std::map<cudaStream_t, std::shared_ptr<Capture>> member_of;  // a capturing stream -> its capture
struct CapturedEvent {
  std::shared_ptr<Capture> capture;
  std::vector<size_t> nodes;
};
std::map<cudaEvent_t, CapturedEvent> captured_events;
uint64_t captures_begun = 0;
// The calling thread's capture interaction mode (cudaThreadExchangeStreamCaptureMode).
thread_local cudaStreamCaptureMode thread_mode = cudaStreamCaptureModeGlobal;

std::vector<std::shared_ptr<Capture>> live_captures() {
  std::set<std::shared_ptr<Capture>> all;
  for (auto& [s, c] : member_of) all.insert(c);
  return {all.begin(), all.end()};
}

// Captures with a blocking member stream: the legacy stream would wait for their work.
std::vector<std::shared_ptr<Capture>> blocking_captures() {
  std::vector<std::shared_ptr<Capture>> found;
  for (auto& c : live_captures())
    for (auto& [s, tail] : c->tails)
      if (stream_blocking(s)) {
        found.push_back(c);
        break;
      }
  return found;
}

cudaError_t refuse(cudaError_t code, const std::vector<std::shared_ptr<Capture>>& invalidated, const std::string& what) {
  for (auto& c : invalidated) c->invalidated = true;
  return fail(code, what);
}

cudaError_t invalidated_error(const char* call) {
  return fail(cudaErrorStreamCaptureInvalidated,
              std::string(call) + ": the stream's capture was invalidated by an earlier error");
}

std::shared_ptr<Capture> capture_of(cudaStream_t stream) {
  auto it = member_of.find(stream);
  return it == member_of.end() ? nullptr : it->second;
}

void add_node(Capture& c, cudaStream_t stream, GraphNode node) {
  std::vector<size_t>& tail = c.tails[stream];
  node.deps = tail;
  c.graph->graph.nodes.push_back(std::move(node));
  tail = {c.graph->graph.nodes.size() - 1};
}

// Work on the legacy default stream (`stream` null) while a blocking stream captures: refused,
// invalidating those captures, as CUDA does; nothing for any other stream.
std::optional<cudaError_t> legacy_stream_refused(cudaStream_t stream, const std::string& what) {
  if (stream != nullptr) return std::nullopt;
  const auto blocking = blocking_captures();
  if (blocking.empty()) return std::nullopt;
  return refuse(cudaErrorStreamCaptureImplicit, blocking, what);
}

bool capture_mode_valid(cudaStreamCaptureMode mode) {
  return mode == cudaStreamCaptureModeGlobal || mode == cudaStreamCaptureModeThreadLocal ||
         mode == cudaStreamCaptureModeRelaxed;
}

// The nodes `tail` depends on, itself included.
std::set<size_t> ancestors(const GraphNodes& g, const std::vector<size_t>& tail) {
  std::set<size_t> seen;
  std::vector<size_t> todo(tail);
  while (!todo.empty()) {
    const size_t n = todo.back();
    todo.pop_back();
    if (!seen.insert(n).second) continue;
    for (size_t d : g.nodes[n].deps) todo.push_back(d);
  }
  return seen;
}

// Ends `c`: its streams capture no more, its events stand for nothing.
void end_capture(const std::shared_ptr<Capture>& c) {
  for (auto it = member_of.begin(); it != member_of.end();) it = it->second == c ? member_of.erase(it) : std::next(it);
  for (auto it = captured_events.begin(); it != captured_events.end();)
    it = it->second.capture == c ? captured_events.erase(it) : std::next(it);
}

}  // namespace

std::optional<cudaError_t> capture_work(cudaStream_t stream, std::function<void()>& work) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (auto e = legacy_stream_refused(stream, "work on the legacy default stream while a blocking stream captures"))
    return e;
  auto c = capture_of(stream);
  if (!c) return std::nullopt;
  if (c->invalidated) return invalidated_error("work issued to a capturing stream");
  add_node(*c, stream, GraphNode{std::move(work), nullptr, {}});
  return cudaSuccess;
}

std::optional<cudaError_t> capture_record(cudaEvent_t event, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  captured_events.erase(event);
  if (auto e = legacy_stream_refused(stream, "cudaEventRecord: on the legacy default stream while a blocking "
                                             "stream captures"))
    return e;
  auto c = capture_of(stream);
  if (!c) return std::nullopt;
  if (c->invalidated) return invalidated_error("cudaEventRecord");
  captured_events[event] = CapturedEvent{c, c->tails[stream]};
  return cudaSuccess;
}

std::optional<cudaError_t> capture_wait(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  auto c = capture_of(stream);
  auto ev = captured_events.find(event);
  if (ev == captured_events.end()) {
    if (!c) return std::nullopt;
    if (c->invalidated) return invalidated_error("cudaStreamWaitEvent");
    if (!(flags & cudaEventWaitExternal))
      return refuse(cudaErrorStreamCaptureIsolation, {c},
                    "cudaStreamWaitEvent: a capturing stream waits for an event recorded outside its capture "
                    "(without cudaEventWaitExternal)");
    add_node(*c, stream, GraphNode{{}, event, {}});
    return cudaSuccess;
  }
  const CapturedEvent& captured = ev->second;
  if (stream == nullptr)
    return refuse(cudaErrorStreamCaptureImplicit, {captured.capture},
                  "cudaStreamWaitEvent: the legacy default stream waits for a captured event");
  if (c && c != captured.capture)
    return refuse(cudaErrorStreamCaptureMerge, {c, captured.capture},
                  "cudaStreamWaitEvent: an event of another capture sequence");
  if (captured.capture->invalidated) return invalidated_error("cudaStreamWaitEvent");
  if (!c) member_of[stream] = captured.capture;  // a fork: the stream joins the capture
  std::vector<size_t>& tail = captured.capture->tails[stream];
  for (size_t n : captured.nodes)
    if (std::find(tail.begin(), tail.end(), n) == tail.end()) tail.push_back(n);
  return cudaSuccess;
}

bool capture_host_waits(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  auto c = capture_of(stream);
  if (c) c->graph->graph.host_waits = true;
  return c != nullptr;
}

bool stream_capturing(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  return capture_of(stream) != nullptr;
}

cudaError_t capture_allows_stream_wait(const char* call, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (auto e = legacy_stream_refused(stream, std::string(call) + ": the legacy default stream while a blocking "
                                                                  "stream captures"))
    return *e;
  auto c = capture_of(stream);  // none for the legacy stream
  if (!c) return cudaSuccess;
  if (c->invalidated) return invalidated_error(call);
  return refuse(cudaErrorStreamCaptureUnsupported, {c}, std::string(call) + ": the stream is capturing");
}

cudaError_t capture_allows_event_wait(const char* call, cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  auto ev = captured_events.find(event);
  if (ev == captured_events.end()) return cudaSuccess;
  return refuse(cudaErrorCapturedEvent, {ev->second.capture},
                std::string(call) + ": the event was last recorded in a capturing stream");
}

cudaError_t capture_allows_device_wait(const char* call) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  const auto all = live_captures();
  if (all.empty()) return cudaSuccess;
  return refuse(cudaErrorStreamCaptureUnsupported, all, std::string(call) + ": a stream is capturing");
}

cudaError_t capture_allows_unsafe_call(const char* call) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (thread_mode == cudaStreamCaptureModeRelaxed) return cudaSuccess;
  // The thread's own captures not begun relaxed; under the global mode also the other threads'
  // captures begun global.
  std::vector<std::shared_ptr<Capture>> prohibiting;
  for (auto& c : live_captures()) {
    const bool own = c->thread == std::this_thread::get_id() && c->mode != cudaStreamCaptureModeRelaxed;
    const bool global = thread_mode == cudaStreamCaptureModeGlobal && c->mode == cudaStreamCaptureModeGlobal;
    if (own || global) prohibiting.push_back(c);
  }
  if (prohibiting.empty()) return cudaSuccess;
  return refuse(cudaErrorStreamCaptureUnsupported, prohibiting,
                std::string(call) + ": potentially unsafe while a stream captures (capture mode global or thread-local)");
}

void capture_event_destroyed(cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  captured_events.erase(event);
}

}  // namespace emu

using namespace emu;

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (cudaError_t e = check_stream("cudaStreamBeginCapture", stream)) return e;
  if (stream == nullptr)
    return fail(cudaErrorStreamCaptureUnsupported, "cudaStreamBeginCapture: the legacy default stream cannot capture");
  if (!capture_mode_valid(mode))
    return fail(cudaErrorInvalidValue, "cudaStreamBeginCapture: capture mode " + std::to_string(int(mode)));
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (capture_of(stream)) return fail(cudaErrorIllegalState, "cudaStreamBeginCapture: the stream is already capturing");
  auto c = std::make_shared<Capture>();
  c->id = ++captures_begun;
  c->origin = stream;
  c->mode = mode;
  c->thread = std::this_thread::get_id();
  c->tails[stream] = {};
  member_of[stream] = c;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (cudaError_t e = check_stream("cudaStreamEndCapture", stream)) return e;
  if (!graph) return fail(cudaErrorInvalidValue, "cudaStreamEndCapture: a null graph pointer");
  std::lock_guard<std::mutex> lock(capture_mutex);
  auto c = capture_of(stream);
  if (!c) return fail(cudaErrorIllegalState, "cudaStreamEndCapture: the stream is not capturing");
  if (c->origin != stream)
    return refuse(cudaErrorStreamCaptureUnmatched, {c}, "cudaStreamEndCapture: the capture began on another stream");
  if (c->mode != cudaStreamCaptureModeRelaxed && c->thread != std::this_thread::get_id())
    return fail(cudaErrorStreamCaptureWrongThread, "cudaStreamEndCapture: called from another thread than the "
                                                   "cudaStreamBeginCapture of a capture not begun relaxed");
  end_capture(c);
  *graph = nullptr;
  if (c->invalidated)
    return fail(cudaErrorStreamCaptureInvalidated, "cudaStreamEndCapture: the capture was invalidated");
  // Every stream forked from the origin must have joined it again: its last work is something the
  // origin's last work waits for.
  const std::set<size_t> joined = ancestors(c->graph->graph, c->tails[stream]);
  for (auto& [s, tail] : c->tails)
    for (size_t n : tail)
      if (!joined.count(n))
        return fail(cudaErrorStreamCaptureUnjoined,
                    "cudaStreamEndCapture: stream " + pointer_text(s) + " was forked into the capture and not joined");
  *graph = c->graph.release();
  graph_created(*graph);
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (cudaError_t e = check_stream("cudaStreamIsCapturing", stream)) return e;
  if (!status) return fail(cudaErrorInvalidValue, "cudaStreamIsCapturing: a null status pointer");
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (stream == nullptr && !blocking_captures().empty())
    return fail(cudaErrorStreamCaptureImplicit, "cudaStreamIsCapturing: the legacy default stream while a blocking "
                                                "stream captures");
  auto c = capture_of(stream);
  *status = !c ? cudaStreamCaptureStatusNone
               : c->invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, cudaStreamCaptureStatus* status, unsigned long long* id,
                                     cudaGraph_t* graph, const cudaGraphNode_t** dependencies,
                                     const cudaGraphEdgeData** edge_data, size_t* num_dependencies) {
  if (dependencies || edge_data || num_dependencies)
    return fail(cudaErrorInvalidValue, "cudaStreamGetCaptureInfo: the emulated GPU reports no graph nodes");
  if (cudaError_t e = cudaStreamIsCapturing(stream, status)) return e;
  std::lock_guard<std::mutex> lock(capture_mutex);
  auto c = capture_of(stream);
  if (id) *id = c ? c->id : 0;
  if (graph) *graph = c ? c->graph.get() : nullptr;
  return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  if (!mode || !capture_mode_valid(*mode))
    return fail(cudaErrorInvalidValue, "cudaThreadExchangeStreamCaptureMode: not a capture mode");
  std::swap(*mode, thread_mode);
  return cudaSuccess;
}

}  // extern "C"
