// The order every overlapped gradient sync keeps, on the host (llmc/dist/host_bucket_sync.h) and on
// the GPU (the CUDA backend over NCCL): begin with a communicator, then buckets 0, 1, ..., n-1 as
// the backward pass finishes them (llmc/dist/gradient_buckets.h), then finish. A call out of that
// order is a bug in the caller: it throws std::logic_error, prefixed with the owner's name.
#pragma once
#include <cstddef>
#include <string>
#include <utility>

#include "llmc/dist/communicator.h"

namespace llmc {

class BucketSyncOrder {
 public:
  explicit BucketSyncOrder(std::string owner) : owner_(std::move(owner)) {}

  bool active() const { return host_ != nullptr; }
  // The communicator of the sync under way (active() must hold).
  Communicator& host() const { return *host_; }
  void begin(Communicator& host);
  // The backward pass has finished `bucket`, which must be the next one.
  void ready(int bucket);
  // Ends the sync once exactly `num_buckets` buckets were ready; returns the sync's communicator.
  Communicator& finish(size_t num_buckets);

 private:
  [[noreturn]] void fail(const std::string& what) const;

  std::string owner_;
  Communicator* host_ = nullptr;  // between begin and finish
  int ready_ = 0;
};

}  // namespace llmc
