#include "llmc/dist/bucket_sync_order.h"

#include <fmt/format.h>
#include <stdexcept>

namespace llmc {

void BucketSyncOrder::fail(const std::string& what) const {
  throw std::logic_error(fmt::format("{}: {}", owner_, what));
}

void BucketSyncOrder::begin(Communicator& host) {
  if (active()) fail("gradient sync begun twice without finishing");
  host_ = &host;
  ready_ = 0;
}

void BucketSyncOrder::ready(int bucket) {
  if (!active()) fail(fmt::format("gradient bucket {} ready outside a gradient sync", bucket));
  if (bucket != ready_) fail(fmt::format("gradient bucket {} ready, expected {}", bucket, ready_));
  ++ready_;
}

Communicator& BucketSyncOrder::finish(size_t num_buckets) {
  if (!active()) fail("gradient sync finished without begin");
  Communicator& host = *host_;
  host_ = nullptr;
  if (size_t(ready_) != num_buckets)
    fail(fmt::format("the backward pass finished {} of {} gradient buckets", ready_, num_buckets));
  return host;
}

}  // namespace llmc
