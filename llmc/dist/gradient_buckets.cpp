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
      if (t.per_layer) b.segments.push_back({t.at(layer), t.at(layer) + t.slice_numel});
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

BucketTransfer plan_bucket_transfer(const GradientBucket& bucket, const OptimizerPartition& partition) {
  BucketTransfer t;
  for (const ElementRange& s : bucket.segments)
    if (s.end < s.begin || s.end > partition.num_elements())
      throw std::logic_error(fmt::format("bucket {}: segment [{}, {}) outside the {} gradients", bucket.name, s.begin,
                                         s.end, partition.num_elements()));
  if (!partition.sharded) {
    for (const ElementRange& s : bucket.segments) {
      t.pack.push_back({s.begin, t.packed_size, s.size()});
      t.packed_size += s.size();
    }
    t.unpack = t.pack;
    return t;
  }
  t.reduce_scatter = true;
  const ZeroLayout& z = partition.layout;
  // The parts of the segments inside each rank's owned range, counted first to size the chunk.
  std::vector<std::vector<ElementRange>> parts(size_t(z.world_size));
  for (int r = 0; r < z.world_size; ++r) {
    const ElementRange owned = z.owned(r);
    for (const ElementRange& s : bucket.segments) {
      const size_t begin = std::max(s.begin, owned.begin), end = std::min(s.end, owned.end);
      if (begin < end) parts[size_t(r)].push_back({begin, end});
    }
    size_t n = 0;
    for (const ElementRange& p : parts[size_t(r)]) n += p.size();
    t.chunk = std::max(t.chunk, n);
  }
  t.packed_size = t.chunk * size_t(z.world_size);
  for (int r = 0; r < z.world_size; ++r) {
    size_t at = 0;
    for (const ElementRange& p : parts[size_t(r)]) {
      t.pack.push_back({p.begin, size_t(r) * t.chunk + at, p.size()});
      if (r == partition.rank) t.unpack.push_back({p.begin, at, p.size()});
      at += p.size();
    }
  }
  return t;
}

size_t largest_bucket_staging(const std::vector<BucketTransfer>& transfers) {
  size_t most = 0;
  for (const BucketTransfer& t : transfers) most = std::max(most, t.packed_size + (t.reduce_scatter ? t.chunk : 0));
  return most;
}

}  // namespace llmc
