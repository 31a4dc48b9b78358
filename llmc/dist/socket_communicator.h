// Communicator (llmc/dist/communicator.h) over the TCP connections of ranks started without MPI
// (-pi tcp|fs, llmc/dist/rendezvous.h), for host buffers: the CPU trainer's collectives, and on
// GPUs the NCCL unique id and the host-staged collectives.
//
// A star: every rank is connected to rank 0 only. A collective sends each rank's data to rank 0,
// which combines it in rank order, x0 + x1 + x2 + ... (one fixed order, so every rank gets the same
// bits and a run repeats bit for bit), and sends each rank its result. Rank 0 reads all inputs
// before it sends any result, and the others send all of theirs before they read: no two ranks
// ever wait on each other's full socket buffers. With two ranks each element is one addition, as
// in MPI's sum, so a 2-rank run equals a 2-rank MPI run bit for bit (tests/dist/check_nompi.sh).
// Rank 0 moves (ranks - 1) times the data in and out: meant for the host side (start-up, the CPU
// trainer, small ranks counts); GPUs sum their gradients over NCCL.
//
// Every message starts with a header (collective, its sequence number, its size): ranks that run
// different collectives, or a peer that sends something else, are an error naming the peer and
// both collectives, never a wrong sum. A peer that ended is an error at its next collective.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "llmc/dist/communicator.h"
#include "llmc/dist/tcp_socket.h"

namespace llmc {

class SocketCommunicator final : public Communicator {
 public:
  // peers as rendezvous() returns them: on rank 0 one per rank, on the others one to rank 0.
  SocketCommunicator(int rank, int world_size, std::vector<TcpSocket> peers);

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
  // A reduce: only the root's buf changes (the others' is only read). It returns once done, as
  // the collectives here have no non-blocking form; start_all_reduce_sum is the blocking sum.
  void start_reduce_sum(float* buf, size_t n, int root) override;

 private:
  enum class Op : uint32_t { kSum = 1, kMax, kReduceScatter, kAllGather, kBroadcast, kBarrier, kReduce };
  struct Header {
    uint32_t magic;
    Op op;
    uint64_t sequence;
    uint64_t bytes;
  };
  void send_message(TcpSocket& to, Op op, const void* data, size_t bytes);
  // Receives the header of `op` with `bytes` of payload; throws when it is anything else.
  void expect_header(TcpSocket& from, Op op, size_t bytes);
  // buf[i] = combine over ranks in rank order, on every rank.
  template <class T, class Combine>
  void reduce_to_all(T* buf, size_t n, Op op, Combine combine);
  // Rank 0: adds `count` elements of `from`'s payload into acc, in pieces.
  template <class T, class Combine>
  void accumulate_from(TcpSocket& from, T* acc, size_t count, Combine combine);

  int rank_;
  int world_size_;
  std::vector<TcpSocket> peers_;
  uint64_t sequence_ = 0;  // collectives so far, the same count on every rank
};

}  // namespace llmc
