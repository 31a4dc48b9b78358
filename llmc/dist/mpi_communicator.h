// Communicator (llmc/dist/communicator.h) over MPI_COMM_WORLD for host buffers: CPU ranks in CI, and
// the host side of GPU runs (it carries NCCL's unique id, llmc/dist/nccl_communicator.h). MPI must be
// initialised first (ProcessGroup, llmc/dist/process_group.h, does that when a launcher started us).
#pragma once
#include <cstddef>
#include <memory>

#include "llmc/dist/communicator.h"

namespace llmc {

class MpiCommunicator final : public Communicator {
 public:
  // MPI counts are ints, so longer buffers go in pieces of at most max_elements_per_call floats
  // (tests pass a small value to exercise the splitting). Throws std::runtime_error if MPI is not
  // initialised. Errors in later calls are thrown as std::runtime_error with MPI's message
  // instead of MPI's default abort.
  explicit MpiCommunicator(size_t max_elements_per_call = size_t(1) << 30);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  void all_reduce_sum(float* buf, size_t n) override;
  double all_reduce_sum(double value) override;
  float all_reduce_sum(float value) override;
  double all_reduce_max(double value) override;
  void reduce_scatter_sum(const float* send, float* recv, size_t recv_count) override;
  void all_gather(const float* send, float* recv, size_t send_count) override;
  void broadcast(void* buf, size_t bytes, int root) override;
  void barrier() override;
  // MPI_Iallreduce and MPI_Ireduce (in place at the root), in pieces like the blocking calls.
  void start_all_reduce_sum(float* buf, size_t n) override;
  void start_reduce_sum(float* buf, size_t n, int root) override;
  void progress() override;
  void wait_all() override;

 private:
  struct PendingRequests;  // MPI_Request values (mpi.h stays out of this header)
  std::unique_ptr<PendingRequests> pending_;
  size_t max_elements_;
  int rank_ = 0;
  int world_size_ = 1;
};

}  // namespace llmc
