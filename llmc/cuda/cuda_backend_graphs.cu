// CudaBackend's micro-step as one CUDA graph (LLMC_CUDA_GRAPHS=on; what the graph holds and what
// stays out of it: llmc/cuda/micro_step_graphs.cuh).
#include <cuda_runtime.h>

#include "llmc/cuda/cuda_backend_impl.cuh"

namespace llmc {

// forward_and_backward as one CUDA graph with LLMC_CUDA_GRAPHS=on outside the tuning pass, else
// launched one by one.
void CudaBackend::Impl::micro_step(int B, int T, float dloss) {
  const auto body = [&] { forward_and_backward(B, T, dloss); };
  if (opt.speed.cuda_graphs == CudaGraphs::kOff || tuning) return body();
  if (opt.fp8) cast_fp8_weights();  // only after the parameters changed, so never inside a graph
  const MicroStepKind kind{B, T, MicroStepKind::bits(dloss), fp8_gemms(), fp8_recording, overlapping()};
  const bool captured = graphs.run(kind, stream, [&] {
    body();
    // The buckets' collectives, forked onto comm_stream, join the captured stream (CUDA ends a
    // capture only so); the encoder backward then follows them.
    if (kind.overlapping) {
      CUDA_CHECK(cudaEventRecord(comm_done, comm_stream));
      CUDA_CHECK(cudaStreamWaitEvent(stream, comm_done, 0));
    }
  });
  // A replay sends the layers' buckets as the captured pass did; the host's account of them follows.
  if (!captured && kind.overlapping)
    for (int bucket = 0; bucket < L(); ++bucket) bucket_order.ready(bucket);
}

uint64_t CudaBackend::graph_launches() const { return impl_->graphs.launches(); }

}  // namespace llmc
