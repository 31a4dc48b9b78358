// When work queued on the emulated GPU runs (docs/cuda-emulator.md, "Streams"). A kernel, a copy,
// a library call or an event record is queued on its stream and runs later, on the host thread that
// waits for it, in an order that keeps only what CUDA promises:
//   - the work of one stream runs in issue order;
//   - after cudaStreamWaitEvent(s, e), s's later work runs after the work e's last record followed;
//   - the legacy default stream (nullptr) and the blocking streams wait for each other; streams
//     created with cudaStreamNonBlocking wait for nothing they are not told to.
// LLMC_EMU_STREAMS chooses among the legal orders:
//   latest  (default) work runs only when the host waits for it (a synchronisation, a query, a copy
//           to pageable memory, cudaFree), the other streams' work as late as that allows;
//   seeded  ready work runs in an order drawn from LLMC_EMU_SEED, some of it as soon as it is issued;
//   issue   work runs when it is issued, in issue order: a GPU that is never behind the host.
// A missing cudaStreamWaitEvent or synchronisation then reads stale or unwritten (0xFF) memory.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

namespace emu {

enum class StreamOrder { latest, seeded, issue };
// LLMC_EMU_STREAMS, read once (an unknown value stops the program, naming the variable).
StreamOrder stream_order();

// The scheduler's part of a stream's life (the runtime checks the handles).
void stream_created(cudaStream_t stream, bool blocking);
void stream_destroyed(cudaStream_t stream);  // its queued work runs first, as CUDA lets it finish

// Queues `work` on `stream` (nullptr: the legacy default stream).
void enqueue(cudaStream_t stream, std::function<void()> work);

// cudaEventRecord: `on_complete` runs when the work queued on `stream` so far has run.
void record_event(cudaEvent_t event, cudaStream_t stream, std::function<void()> on_complete);
// cudaStreamWaitEvent: `stream`'s later work waits for the event's last record (none: no wait).
void wait_event(cudaStream_t stream, cudaEvent_t event);
void event_destroyed(cudaEvent_t event);  // its pending record runs first

// The host waits: everything `stream`'s queued work needs, and that work, runs.
void finish_stream(cudaStream_t stream);
void finish_event(cudaEvent_t event);
void finish_all();
// The queries: true when nothing is pending; otherwise the work runs now and the answer is false
// (cudaErrorNotReady), so that a host polling in a loop sees the device progress.
bool stream_idle(cudaStream_t stream);
bool event_done(cudaEvent_t event);

}  // namespace emu
