#include "llmc/dist/host_bucket_sync.h"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

namespace llmc {

void HostBucketSync::begin(Communicator& host, float* grads) {
  if (active()) throw std::logic_error("gradient sync: begun twice without finishing");
  if (staging_.empty())
    for (const BucketTransfer& t : transfers_) staging_.emplace_back(t.staging);
  host_ = &host;
  grads_ = grads;
  started_ = 0;
}

void HostBucketSync::bucket_ready(int bucket) {
  if (!active() || bucket != started_)
    throw std::logic_error(fmt::format("gradient sync: bucket {} ready, expected {}", bucket, started_));
  const BucketTransfer& t = transfers_[size_t(bucket)];
  float* staging = staging_[size_t(bucket)].data();
  for (const CopySpan& s : t.pack) std::copy_n(grads_ + s.buffer_offset, s.count, staging + s.packed_offset);
  for (const BucketMessage& m : t.messages) {
    float* buf = m.buffer(grads_, staging);
    if (m.root < 0)
      host_->start_all_reduce_sum(buf, m.count);
    else
      host_->start_reduce_sum(buf, m.count, m.root);
  }
  ++started_;
  host_->progress();
}

void HostBucketSync::finish() {
  if (!active()) throw std::logic_error("gradient sync: finish without begin");
  if (started_ != int(transfers_.size()))
    throw std::logic_error(fmt::format("gradient sync: the backward pass finished {} of {} buckets", started_,
                                       transfers_.size()));
  host_->wait_all();
  for (size_t b = 0; b < transfers_.size(); ++b)
    for (const CopySpan& s : transfers_[b].unpack)
      std::copy_n(staging_[b].data() + s.packed_offset, s.count, grads_ + s.buffer_offset);
  host_ = nullptr;
  grads_ = nullptr;
}

}  // namespace llmc
