// A Communicator that tells the watchdog (llmc/train/watchdog.h) which collective its rank waits in:
// each call marks the operation's name, forwards to the wrapped communicator and, on return,
// counts as progress. Every host collective goes through it (the Trainer's, the CPU backend's, the
// CUDA backend's host staging and NCCL's id broadcast), so a rank whose peer is gone reports e.g.
// "waiting in all_reduce_sum" without a mark at any call site.
// Every method of Communicator must be forwarded here, marked with its name.
#pragma once
#include <cstddef>

#include "llmc/dist/communicator.h"
#include "llmc/train/watchdog.h"

namespace llmc {

class WatchedCommunicator final : public Communicator {
 public:
  // Both must outlive this object.
  WatchedCommunicator(Communicator& inner, Watchdog& watchdog) : inner_(inner), watchdog_(watchdog) {}

  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  void all_reduce_sum(float* buf, size_t n) override {
    const Watchdog::InCollective mark(watchdog_, "all_reduce_sum");
    inner_.all_reduce_sum(buf, n);
  }
  double all_reduce_sum(double value) override {
    const Watchdog::InCollective mark(watchdog_, "all_reduce_sum");
    return inner_.all_reduce_sum(value);
  }
  float all_reduce_sum(float value) override {
    const Watchdog::InCollective mark(watchdog_, "all_reduce_sum");
    return inner_.all_reduce_sum(value);
  }
  double all_reduce_max(double value) override {
    const Watchdog::InCollective mark(watchdog_, "all_reduce_max");
    return inner_.all_reduce_max(value);
  }
  void reduce_scatter_sum(const float* send, float* recv, size_t recv_count) override {
    const Watchdog::InCollective mark(watchdog_, "reduce_scatter_sum");
    inner_.reduce_scatter_sum(send, recv, recv_count);
  }
  void all_gather(const float* send, float* recv, size_t send_count) override {
    const Watchdog::InCollective mark(watchdog_, "all_gather");
    inner_.all_gather(send, recv, send_count);
  }
  void broadcast(void* buf, size_t bytes, int root) override {
    const Watchdog::InCollective mark(watchdog_, "broadcast");
    inner_.broadcast(buf, bytes, root);
  }
  void barrier() override {
    const Watchdog::InCollective mark(watchdog_, "barrier");
    inner_.barrier();
  }
  void start_all_reduce_sum(float* buf, size_t n) override {
    const Watchdog::InCollective mark(watchdog_, "start_all_reduce_sum");
    inner_.start_all_reduce_sum(buf, n);
  }
  void start_reduce_sum(float* buf, size_t n, int root) override {
    const Watchdog::InCollective mark(watchdog_, "start_reduce_sum");
    inner_.start_reduce_sum(buf, n, root);
  }
  void progress() override {
    const Watchdog::InCollective mark(watchdog_, "progress");
    inner_.progress();
  }
  void wait_all() override {
    const Watchdog::InCollective mark(watchdog_, "wait_all (the gradient buckets' sums)");
    inner_.wait_all();
  }

 private:
  Communicator& inner_;
  Watchdog& watchdog_;
};

}  // namespace llmc
