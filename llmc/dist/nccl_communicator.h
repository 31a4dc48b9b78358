// Communicator (llmc/dist/communicator.h) over NCCL for device buffers: one GPU per rank, the one
// current when it is created (the CUDA backend selects it first). Every collective is enqueued on the stream given
// at construction and completes asynchronously in stream order, so a backend that computes on the
// same stream needs no synchronisation; the scalar all_reduce_sum and barrier() wait for the
// stream (they return host values / must hold for the host).
//
// Status: compiled for sm_80 and sm_90a (make nccl-communicator), not yet run on a multi-GPU
// machine (docs/multi-gpu.md).
#pragma once
#include <cstddef>
#include <cuda_runtime.h>
#include <nccl.h>

#include "llmc/dist/abort_hooks.h"
#include "llmc/dist/communicator.h"

namespace llmc {

class NcclCommunicator final : public Communicator {
 public:
  // On the current GPU (stream's): rank 0 creates NCCL's unique id and `host`
  // (MpiCommunicator, or SingleProcessCommunicator for one rank) broadcasts it to the others;
  // every rank then joins the NCCL communicator of host.world_size() ranks. `host` must outlive
  // this object (barrier() goes through it). Throws std::runtime_error with CUDA's or NCCL's
  // message on failure. While it exists, the process's abort hooks (llmc/dist/abort_hooks.h) hold
  // an ncclCommAbort of it: the watchdog (--step-timeout) releases a GPU stuck in a collective.
  NcclCommunicator(Communicator& host, cudaStream_t stream);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }

  // Device pointers.
  void all_reduce_sum(float* buf, size_t n) override;
  void reduce_scatter_sum(const float* send, float* recv, size_t recv_count) override;
  void all_gather(const float* send, float* recv, size_t send_count) override;
  void broadcast(void* buf, size_t bytes, int root) override;
  // The same three collectives for device buffers of any NCCL element type (the bf16 gradients and
  // parameters of the CUDA backend); in place when recv is send's chunk of this rank (reduce-scatter:
  // recv == send + rank*recv_count; all-gather: send == recv + rank*send_count).
  void all_reduce_sum(void* buf, size_t n, ncclDataType_t type);
  void reduce_scatter_sum(const void* send, void* recv, size_t recv_count, ncclDataType_t type);
  void all_gather(const void* send, void* recv, size_t send_count, ncclDataType_t type);
  // Gradient buckets overlapped with the backward pass (llmc/dist/gradient_buckets.h), on a
  // second stream of this GPU: an all-reduce, and a reduce in place whose sum lands in root's buf
  // (the other ranks' buf is only read); between group_start and group_end NCCL launches the
  // calls together.
  void all_reduce_sum(void* buf, size_t n, ncclDataType_t type, cudaStream_t stream);
  void reduce_sum(void* buf, size_t n, ncclDataType_t type, int root, cudaStream_t stream);
  void group_start();
  void group_end();
  // Host values, staged through a small device buffer; these synchronise the stream.
  double all_reduce_sum(double value) override;
  float all_reduce_sum(float value) override;
  double all_reduce_max(double value) override;
  void barrier() override;

 private:
  Communicator& host_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_;
  int rank_ = 0;
  int world_size_ = 1;
  double* scalar_ = nullptr;  // device scratch for the scalar sums
  AbortHooks::Id abort_hook_ = 0;
  double reduce_scalar(double value, ncclRedOp_t op);
};

}  // namespace llmc
