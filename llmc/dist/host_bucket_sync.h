// Overlapped gradient communication for a backend whose gradients are a host buffer (the CPU
// backend): the buckets of llmc/dist/gradient_buckets.h packed and sent with the host
// communicator's non-blocking sums while the backward pass computes the next ones.
#pragma once
#include <vector>

#include "llmc/dist/bucket_sync_order.h"
#include "llmc/dist/communicator.h"
#include "llmc/dist/gradient_buckets.h"

namespace llmc {

class HostBucketSync {
 public:
  // The buckets of this model and how they travel for this rank's partition; their staging (up to
  // the whole gradient buffer) is allocated by the first begin(), so a run without --overlap has none.
  HostBucketSync(const GPT2Config& config, const OptimizerPartition& partition)
      : transfers_(plan_bucket_transfers(config, partition)), order_("host bucket sync") {}

  // Arms the sync for one backward pass over `grads` (partition.buffer_size() floats).
  void begin(Communicator& host, float* grads);
  bool active() const { return order_.active(); }
  // The backward pass has finished bucket `bucket` (buckets come in order 0, 1, ...): packs it and
  // starts its collective.
  void bucket_ready(int bucket);
  // Waits for every bucket and writes the sums into the gradients. Calls out of order throw
  // std::logic_error (llmc/dist/bucket_sync_order.h).
  void finish();

 private:
  std::vector<BucketTransfer> transfers_;
  std::vector<std::vector<float>> staging_;  // one per bucket: all buckets are in flight at once
  BucketSyncOrder order_;
  float* grads_ = nullptr;  // the active sync's
};

}  // namespace llmc
