#include "llmc/dist/host_bucket_sync.h"

#include <algorithm>

namespace llmc {

void HostBucketSync::begin(Communicator& host, float* grads) {
  order_.begin(host);
  if (staging_.empty())
    for (const BucketTransfer& t : transfers_) staging_.emplace_back(t.staging);
  grads_ = grads;
}

void HostBucketSync::bucket_ready(int bucket) {
  order_.ready(bucket);
  Communicator& host = order_.host();
  const BucketTransfer& t = transfers_[size_t(bucket)];
  float* staging = staging_[size_t(bucket)].data();
  for (const CopySpan& s : t.pack) std::copy_n(grads_ + s.buffer_offset, s.count, staging + s.packed_offset);
  for (const BucketMessage& m : t.messages) {
    float* buf = m.buffer(grads_, staging);
    if (m.root < 0)
      host.start_all_reduce_sum(buf, m.count);
    else
      host.start_reduce_sum(buf, m.count, m.root);
  }
  host.progress();
}

void HostBucketSync::finish() {
  order_.finish(transfers_.size()).wait_all();
  for (size_t b = 0; b < transfers_.size(); ++b)
    for (const CopySpan& s : transfers_[b].unpack)
      std::copy_n(staging_[b].data() + s.packed_offset, s.count, grads_ + s.buffer_offset);
}

}  // namespace llmc
