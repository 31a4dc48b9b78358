// Gradient communication overlapped with the backward pass (--overlap 1, docs/multi-gpu.md): the
// flat gradient buffer cut into buckets in the order the backward pass finishes them, and how each
// bucket travels in one collective (pure functions, no communication).
//
// The backward pass runs from the last layer to the first, then the embeddings. The flat buffer is
// in checkpoint order (docs/contract.md): tensor by tensor, each per-layer tensor holding its L
// layer slices, so one layer's gradients are 12 separate segments, not one range. Buckets:
//   0        layer L-1's 12 slices and lnfw, lnfb (finished before layer L-1's backward ends)
//   1..L-1   layer L-1-b's 12 slices
//   L        wte and wpe: wte collects the classifier's gradient first and the encoder's last.
// A bucket's segments are packed into one contiguous buffer so that it costs one collective:
//   ZeRO stage 0: packed = the segments one after another; all-reduce; unpack the same spans.
//   ZeRO stage 1: rank r owns [r*S, (r+1)*S) of the flat buffer (llmc/dist/zero_sharding.h), and
//     reduce-scatter hands rank r the r-th of W equal chunks: so the packed buffer holds, chunk by
//     chunk, the parts of the segments that rank r owns (zero-padded to the longest rank's), and
//     rank r unpacks its received chunk into its owned range.
// Every gradient element is summed over the same W values as in the one-collective path, so with
// two ranks (one addition, which commutes) the result is bit-identical; with more, the reduction
// order may differ, within the bars of docs/contract.md.
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

// One copy: count elements between the flat buffer at buffer_offset and the packed buffer at
// packed_offset.
struct CopySpan {
  size_t buffer_offset = 0;
  size_t packed_offset = 0;
  size_t count = 0;
  bool operator==(const CopySpan& o) const {
    return buffer_offset == o.buffer_offset && packed_offset == o.packed_offset && count == o.count;
  }
};

// How one bucket travels for one rank.
struct BucketTransfer {
  bool reduce_scatter = false;  // ZeRO stage 1; otherwise all-reduce
  size_t packed_size = 0;       // floats of the packed send buffer (stage 1: world_size * chunk)
  size_t chunk = 0;             // stage 1: floats each rank receives
  std::vector<CopySpan> pack;   // flat buffer -> packed buffer; the rest of the packed buffer is zero
  // Back into the flat buffer, from the packed buffer (stage 0) or from the received chunk (stage 1,
  // packed_offset counted from the chunk's start).
  std::vector<CopySpan> unpack;
};

// The transfer of `bucket` for partition.rank: an all-reduce for an unsharded partition, a
// reduce-scatter for a ZeRO-1 one. Throws std::logic_error if a segment lies outside the buffer.
BucketTransfer plan_bucket_transfer(const GradientBucket& bucket, const OptimizerPartition& partition);

// The largest packed_size (plus, for stage 1, chunk: the receive buffer) of any bucket: the
// staging a backend needs to send the buckets one after another through one buffer.
size_t largest_bucket_staging(const std::vector<BucketTransfer>& transfers);

}  // namespace llmc
