#include "llmc/dist/gradient_buckets.h"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

namespace llmc {

size_t GradientBucket::size() const {
  size_t n = 0;
  for (const ElementRange& s : segments) n += s.size();
  return n;
}

std::vector<GradientBucket> gradient_buckets(const GPT2Config& config) {
  const auto layout = param_layout(config);
  const int L = config.num_layers;
  auto whole = [&](int index) { return ElementRange{layout[index].offset, layout[index].offset + layout[index].numel}; };
  std::vector<GradientBucket> buckets;
  for (int layer = L - 1; layer >= 0; --layer) {
    GradientBucket b;
    b.name = fmt::format("layer {}", layer);
    for (const ParamTensor& t : layout)
      if (t.per_layer) b.segments.push_back({t.at(layer), t.at(layer) + t.shape.numel()});
    if (layer == L - 1) {
      b.name += " + lnf";
      b.segments.push_back(whole(kLnfw));
      b.segments.push_back(whole(kLnfb));
    }
    buckets.push_back(std::move(b));
  }
  buckets.push_back({"embeddings", {whole(kWte), whole(kWpe)}});
  return buckets;
}

namespace {

// A message over `ranges`, adjacent ranges merged into one span (wte and wpe are one range).
BucketMessage make_message(int root, const std::vector<ElementRange>& ranges) {
  BucketMessage m;
  m.root = root;
  for (const ElementRange& r : ranges) {
    if (!m.spans.empty() && m.spans.back().buffer_offset + m.spans.back().count == r.begin)
      m.spans.back().count += r.size();
    else
      m.spans.push_back({r.begin, 0, r.size()});
    m.count += r.size();
  }
  return m;
}

}  // namespace

BucketTransfer plan_bucket_transfer(const GradientBucket& bucket, const OptimizerPartition& partition) {
  for (const ElementRange& s : bucket.segments)
    if (s.end < s.begin || s.end > partition.num_elements())
      throw std::logic_error(fmt::format("bucket {}: segment [{}, {}) outside the {} gradients", bucket.name, s.begin,
                                         s.end, partition.num_elements()));
  BucketTransfer t;
  if (!partition.sharded) {
    t.messages.push_back(make_message(-1, bucket.segments));
  } else {
    const ZeroLayout& z = partition.layout;
    for (int r = 0; r < z.world_size; ++r) {
      const ElementRange owned = z.owned(r);
      std::vector<ElementRange> parts;
      for (const ElementRange& s : bucket.segments) {
        const ElementRange part = intersect(s, owned);
        if (part.size() > 0) parts.push_back(part);
      }
      if (!parts.empty()) t.messages.push_back(make_message(r, parts));
    }
  }
  for (BucketMessage& m : t.messages) {
    if (m.in_place()) continue;
    m.packed_offset = t.staging;
    const bool received = m.root < 0 || m.root == partition.rank;
    for (CopySpan& s : m.spans) {
      s.packed_offset = t.staging;
      t.staging += s.count;
      t.pack.push_back(s);
      if (received) t.unpack.push_back(s);
    }
  }
  return t;
}

std::vector<BucketTransfer> plan_bucket_transfers(const GPT2Config& config, const OptimizerPartition& partition) {
  std::vector<BucketTransfer> transfers;
  for (const GradientBucket& b : gradient_buckets(config)) transfers.push_back(plan_bucket_transfer(b, partition));
  return transfers;
}

size_t largest_staging(const std::vector<BucketTransfer>& transfers) {
  size_t most = 0;
  for (const BucketTransfer& t : transfers) most = std::max(most, t.staging);
  return most;
}

}  // namespace llmc
