// The collective operations multi-rank training needs (docs/contract.md, Architecture): the training loop and
// ZeRO-1 (llmc/dist/zero_sharding.h) are written once against this interface and run unchanged over
//   - SingleProcessCommunicator: one rank, no launcher; every collective is the identity;
//   - MpiCommunicator (llmc/dist/mpi_communicator.h): host buffers over MPI_COMM_WORLD (CPU ranks, CI);
//   - SocketCommunicator (llmc/dist/socket_communicator.h): host buffers over TCP, for ranks started
//     without MPI (-pi tcp|fs); sums in rank order through rank 0;
//   - NcclCommunicator (llmc/dist/nccl_communicator.h): device buffers, one GPU per rank.
// Buffers live where the implementation works: host memory for the first three, device memory for
// NCCL. A backend whose data sits on the GPU but that talks through MpiCommunicator stages through
// host memory itself (MpiCommunicator does not assume a CUDA-aware MPI).
//
// Summation order: a sum over ranks is computed in an order the implementation picks (MPI and
// NCCL choose ring, tree or recursive-doubling algorithms by message size and rank count;
// SocketCommunicator adds in rank order), so
// runs with different world sizes round differently, by about one float ulp per addition. That is
// far below the bar for ZeRO-1 in docs/contract.md (losses of np=1, 2, 4 equal to 1e-5 relative at every
// step). Within one run every rank receives the same bits (tests/dist/test_collectives.cpp checks
// this for MPI and the sockets), which the loop relies on: all ranks clip with the same norm.
#pragma once
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>

namespace llmc {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // buf[i] = sum over ranks of buf[i], on every rank.
  virtual void all_reduce_sum(float* buf, size_t n) = 0;
  // The sum over ranks of a scalar, returned on every rank.
  virtual double all_reduce_sum(double value) = 0;
  virtual float all_reduce_sum(float value) = 0;
  // The largest of the ranks' values, returned on every rank (the loop agrees on a stop signal).
  virtual double all_reduce_max(double value) = 0;

  // send holds world_size() equal chunks of recv_count floats; rank r receives in recv the sum
  // over ranks of chunk r. Pad buffers to equal chunks with ZeroLayout (llmc/dist/zero_sharding.h).
  virtual void reduce_scatter_sum(const float* send, float* recv, size_t recv_count) = 0;
  // recv (world_size() * send_count floats) receives every rank's send, rank r's at r*send_count.
  virtual void all_gather(const float* send, float* recv, size_t send_count) = 0;
  // Copies root's bytes to every rank's buf.
  virtual void broadcast(void* buf, size_t bytes, int root) = 0;
  // Returns once every rank has entered it.
  virtual void barrier() = 0;

  // Non-blocking sums, for gradient buckets sent while the backward pass goes on
  // (llmc/dist/gradient_buckets.h). start_* returns at once, or once done for an implementation
  // that has no non-blocking form (the defaults here); until wait_all() returns the buffers must be
  // neither read nor written. Every rank starts the same operations in the same order, and may
  // call blocking collectives in between. progress() lets an implementation without a progress
  // thread (MPI's non-blocking collectives advance only inside MPI calls) move pending operations
  // on; call it between pieces of work.
  // start_all_reduce_sum: as all_reduce_sum. start_reduce_sum: rank `root`'s buf becomes the sum
  // over the ranks; the other ranks' buf is only read (the default, an all-reduce, writes the sum
  // there too, which callers must allow).
  virtual void start_all_reduce_sum(float* buf, size_t n) { all_reduce_sum(buf, n); }
  virtual void start_reduce_sum(float* buf, size_t n, int root) {
    check_root(root, "reduce");
    all_reduce_sum(buf, n);
  }
  virtual void progress() {}
  virtual void wait_all() {}

 protected:
  // Throws std::invalid_argument "<what>: root 5 is not a rank of 4" unless root is a rank.
  void check_root(int root, const char* what) const {
    if (root < 0 || root >= world_size())
      throw std::invalid_argument(std::string(what) + ": root " + std::to_string(root) + " is not a rank of " +
                                  std::to_string(world_size()));
  }
};

// One rank and no launcher: sums over one rank are the values themselves.
class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void all_reduce_sum(float*, size_t) override {}
  double all_reduce_sum(double value) override { return value; }
  float all_reduce_sum(float value) override { return value; }
  double all_reduce_max(double value) override { return value; }
  void reduce_scatter_sum(const float* send, float* recv, size_t recv_count) override {
    if (send != recv) std::memmove(recv, send, recv_count * sizeof(float));
  }
  void all_gather(const float* send, float* recv, size_t send_count) override {
    if (send != recv) std::memmove(recv, send, send_count * sizeof(float));
  }
  void broadcast(void*, size_t, int root) override { check_root(root, "broadcast"); }
  void barrier() override {}
};

}  // namespace llmc
