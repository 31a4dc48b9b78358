// One CUDA graph per micro-step (LLMC_CUDA_GRAPHS=on): the forward pass, the classifier and the
// backward pass through the layers (CudaBackend::Impl::graphed_micro_step) are captured the first time a
// micro-step of their kind runs, then each micro-step of that kind is one cudaGraphLaunch in place
// of a few hundred kernel launches.
//
// A graph replays what was captured, with the values the launches had then: the buffers' addresses
// (fixed for the backend's life), the shape, the GEMM algorithms and every by-value argument. So
// everything that varies from one micro-step to the next stays out of it: the tokens are uploaded
// into fixed device buffers before the launch; the encoder backward (its grid sized by the host's
// token buckets, its rounding seed from the tokens), the FP8 history update (its index) and the
// weights' FP8 casts (only when the parameters changed) run uncaptured around it; and the rest of
// what the captured launches depend on is the key (MicroStepKind): another value gets a graph of
// its own.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "llmc/cuda/common.cuh"

namespace llmc {

struct MicroStepKind {
  int B = 0, T = 0;
  uint32_t dloss_bits = 0;     // the classifier's loss scale, bit for bit
  bool fp8_gemms = false;      // FP8 GEMMs (after calibration) or floatX
  bool fp8_recording = false;  // the casts record amaxes
  bool overlapping = false;    // the gradient buckets go to NCCL during the backward pass

  static uint32_t bits(float x) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return u;
  }
  bool operator<(const MicroStepKind& o) const {
    return std::tie(B, T, dloss_bits, fp8_gemms, fp8_recording, overlapping) <
           std::tie(o.B, o.T, o.dloss_bits, o.fp8_gemms, o.fp8_recording, o.overlapping);
  }
};

class MicroStepGraphs {
 public:
  MicroStepGraphs() = default;
  MicroStepGraphs(const MicroStepGraphs&) = delete;
  MicroStepGraphs& operator=(const MicroStepGraphs&) = delete;
  ~MicroStepGraphs() { clear(); }

  // Runs `body` (which issues its work to `stream` and streams it forks from there, joined back) as
  // kind's graph: captured now if kind has none yet, then launched. Returns whether it captured,
  // i.e. whether `body` ran on the host.
  template <class Body>
  bool run(const MicroStepKind& kind, cudaStream_t stream, const Body& body) {
    auto it = execs_.find(kind);
    const bool capture = it == execs_.end();
    if (capture) it = execs_.emplace(kind, capture_graph(stream, body)).first;
    CUDA_CHECK(cudaGraphLaunch(it->second, stream));
    ++launches_;
    return capture;
  }

  // Forgets every graph (the GEMM algorithms changed: a tuning pass, a loaded table).
  void clear() {
    for (auto& [kind, exec] : execs_) cudaGraphExecDestroy(exec);
    execs_.clear();
  }

  uint64_t launches() const { return launches_; }

 private:
  // Thread-local mode: a call on this thread that CUDA would not capture (a synchronisation, an
  // allocation) fails and names itself, while other host threads are left alone.
  template <class Body>
  cudaGraphExec_t capture_graph(cudaStream_t stream, const Body& body) {
    try {
      CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      try {
        body();
      } catch (...) {
        cudaGraph_t discarded = nullptr;
        cudaStreamEndCapture(stream, &discarded);
        if (discarded) cudaGraphDestroy(discarded);
        throw;
      }
      cudaGraph_t graph = nullptr;
      CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
      cudaGraphExec_t exec = nullptr;
      const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
      cudaGraphDestroy(graph);
      CUDA_CHECK(instantiated);
      return exec;
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string("LLMC_CUDA_GRAPHS=on: the micro-step could not be captured as a CUDA graph (") +
                               e.what() + "); LLMC_CUDA_GRAPHS=off launches it kernel by kernel");
    }
  }

  std::map<MicroStepKind, cudaGraphExec_t> execs_;
  uint64_t launches_ = 0;
};

}  // namespace llmc
