// Gradient communication overlapped with the backward pass (--overlap 1, docs/multi-gpu.md): the
// flat gradient buffer cut into buckets in the order the backward pass finishes them, and the
// collectives that carry each bucket (pure functions, no communication).
//
// The backward pass runs from the last layer to the first, then the embeddings. The flat buffer is
// in checkpoint order (docs/contract.md): tensor by tensor, each per-layer tensor holding its L
// layer slices, so one layer's gradients are 12 separate segments, not one range. Buckets:
//   0        layer L-1's 12 slices and lnfw, lnfb (finished before layer L-1's backward ends)
//   1..L-1   layer L-1-b's 12 slices
//   L        wte and wpe: wte collects the classifier's gradient first and the encoder's last.
// The messages of a bucket:
//   ZeRO stage 0: one all-reduce of all its segments.
//   ZeRO stage 1: rank r owns [r*S, (r+1)*S) of the flat buffer (llmc/dist/zero_sharding.h), so
//     each rank whose range the bucket touches gets one reduce, rooted at it, of the bucket's
//     parts inside its range. (A reduce-scatter would need W equal chunks, but a layer's slices
//     fall unevenly into the ranks' ranges: padding every chunk to the largest part would send
//     several times the bucket.) Each element travels to its owner once, as in a reduce-scatter.
// A message whose segments form one contiguous span (adjacent segments are merged: wte and wpe)
// runs in place on the flat buffer; one of several spans is packed into a staging buffer first and
// unpacked after. Every element is summed over the same W values as in
// the one-collective path: with two ranks (one addition, which commutes) the result is
// bit-identical; with more the reduction order may differ, within the bars of docs/contract.md.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "llmc/dist/zero_sharding.h"
#include "llmc/gpt2.h"

namespace llmc {

struct GradientBucket {
  std::string name;                    // "layer 11 + lnf", "layer 3", "embeddings"
  std::vector<ElementRange> segments;  // in increasing buffer order, disjoint
  size_t size() const;
};

// The L + 1 buckets in the order the backward pass finishes them (see above).
std::vector<GradientBucket> gradient_buckets(const GPT2Config& config);

// One copy: count elements between the flat buffer at buffer_offset and the bucket's staging at
// packed_offset.
struct CopySpan {
  size_t buffer_offset = 0;
  size_t packed_offset = 0;
  size_t count = 0;
};

// One collective of a bucket: an all-reduce (root < 0) or a reduce to rank `root`.
struct BucketMessage {
  int root = -1;
  std::vector<CopySpan> spans;  // what it carries, in buffer order
  size_t count = 0;             // elements, the sum of the spans' counts
  size_t packed_offset = 0;     // where it lies in the staging, unless in place
  bool in_place() const { return spans.size() == 1; }
  // What the collective sums: the one span on the flat buffer, or the packed message in the staging.
  template <class T>
  T* buffer(T* flat, T* staging) const {
    return in_place() ? flat + spans[0].buffer_offset : staging + packed_offset;
  }
};

// How one bucket travels, seen from one rank.
struct BucketTransfer {
  std::vector<BucketMessage> messages;
  size_t staging = 0;           // floats of staging the packed messages need
  std::vector<CopySpan> pack;   // every packed message's spans: flat buffer -> staging
  std::vector<CopySpan> unpack; // the packed messages this rank receives: staging -> flat buffer
};

// The transfer of `bucket` for partition.rank: an all-reduce for an unsharded partition, reduces
// to the owners for a ZeRO-1 one. Throws std::logic_error if a segment lies outside the buffer.
BucketTransfer plan_bucket_transfer(const GradientBucket& bucket, const OptimizerPartition& partition);

// Every bucket of `config` (gradient_buckets) planned for `partition`, in backward order.
std::vector<BucketTransfer> plan_bucket_transfers(const GPT2Config& config, const OptimizerPartition& partition);
// The staging the largest bucket needs, for a backend whose buckets go one after another through
// one buffer (the CUDA backend's comm stream runs them in order).
size_t largest_staging(const std::vector<BucketTransfer>& transfers);

}  // namespace llmc
