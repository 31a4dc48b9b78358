#include "llmc/dist/host_bucket_sync.h"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

namespace llmc {

void HostBucketSync::begin(Communicator& host, float* grads) {
  if (active()) throw std::logic_error("gradient sync: begun twice without finishing");
  // Allocated on the first step only; the padding between a rank's parts and its chunk's end
  // stays zero (only pack spans are ever written).
  if (transfers_.empty()) {
    for (const GradientBucket& b : gradient_buckets(config_)) transfers_.push_back(plan_bucket_transfer(b, partition_));
    for (const BucketTransfer& t : transfers_) {
      packed_.emplace_back(t.packed_size, 0.0f);
      received_.emplace_back(t.reduce_scatter ? t.chunk : 0, 0.0f);
    }
  }
  host_ = &host;
  grads_ = grads;
  started_ = 0;
}

void HostBucketSync::bucket_ready(int bucket) {
  if (!active() || bucket != started_)
    throw std::logic_error(fmt::format("gradient sync: bucket {} ready, expected {}", bucket, started_));
  const BucketTransfer& t = transfers_[size_t(bucket)];
  float* packed = packed_[size_t(bucket)].data();
  for (const CopySpan& s : t.pack) std::copy_n(grads_ + s.buffer_offset, s.count, packed + s.packed_offset);
  if (t.reduce_scatter)
    host_->start_reduce_scatter_sum(packed, received_[size_t(bucket)].data(), t.chunk);
  else
    host_->start_all_reduce_sum(packed, t.packed_size);
  ++started_;
  host_->progress();
}

void HostBucketSync::finish() {
  if (!active()) throw std::logic_error("gradient sync: finish without begin");
  if (started_ != int(transfers_.size()))
    throw std::logic_error(fmt::format("gradient sync: the backward pass finished {} of {} buckets", started_,
                                       transfers_.size()));
  host_->wait_all();
  for (size_t b = 0; b < transfers_.size(); ++b) {
    const BucketTransfer& t = transfers_[b];
    const float* from = t.reduce_scatter ? received_[b].data() : packed_[b].data();
    for (const CopySpan& s : t.unpack) std::copy_n(from + s.packed_offset, s.count, grads_ + s.buffer_offset);
  }
  host_ = nullptr;
  grads_ = nullptr;
}

}  // namespace llmc
