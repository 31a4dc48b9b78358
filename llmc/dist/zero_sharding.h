// ZeRO-1 bookkeeping (pure functions, no communication): which contiguous part of the flat
// parameter buffer each rank owns the optimizer state of, and which parameter tensors that part
// cuts through.
//
// A flat buffer of n floats is padded to W equal chunks of shard_size floats, shard_size =
// ceil(n / W) rounded up to a multiple of `alignment`, because reduce-scatter and all-gather move
// equal-sized chunks (llmc/dist/communicator.h). Rank r's chunk is [r*shard_size, (r+1)*shard_size) of
// the padded buffer; the part of it below n holds real parameters and is what r owns. One step:
//   reduce_scatter_sum(grads_padded, grad_shard, shard_size)   rank r: summed gradients of chunk r
//   the optimizer on the owned elements, per tensor slice (weight decay is per tensor)
//   all_gather(param_shard, params_padded, shard_size)         every rank: all updated parameters
// The padding is never read as a parameter; keep it zero so that sums of squares stay exact.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <vector>

#include "llmc/gpt2.h"

namespace llmc {

struct ElementRange {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
  bool operator==(const ElementRange& o) const { return begin == o.begin && end == o.end; }
};

// The elements in both ranges; empty (size 0, begin == end) when they do not overlap.
inline ElementRange intersect(ElementRange a, ElementRange b) {
  const size_t begin = std::max(a.begin, b.begin), end = std::min(a.end, b.end);
  return begin < end ? ElementRange{begin, end} : ElementRange{begin, begin};
}

struct ZeroLayout {
  size_t num_elements = 0;  // n, the real buffer
  int world_size = 1;       // W
  size_t shard_size = 0;    // floats per chunk

  size_t padded_size() const { return shard_size * size_t(world_size); }
  // Rank r's chunk of the padded buffer: [r*shard_size, (r+1)*shard_size).
  ElementRange chunk(int rank) const;
  // The real elements rank r owns: its chunk cut at n (empty for ranks past the end).
  ElementRange owned(int rank) const;
};

// Throws std::invalid_argument for world_size < 1 or alignment 0.
ZeroLayout make_zero_layout(size_t num_elements, int world_size, size_t alignment = 1);

// What one rank's backend keeps of the optimizer (-z): with ZeRO stage 0 every rank holds the optimizer
// state of every parameter; with stage 1 only of layout.owned(rank), and its gradient and
// parameter buffers are padded to layout.padded_size() for the reduce-scatter and all-gather.
struct OptimizerPartition {
  ZeroLayout layout;     // stage 0: one chunk of exactly the buffer
  int rank = 0;
  bool sharded = false;  // stage 1

  size_t num_elements() const { return layout.num_elements; }
  // The elements whose optimizer state this rank keeps and updates.
  ElementRange owned() const { return sharded ? layout.owned(rank) : ElementRange{0, layout.num_elements}; }
  // Length of the gradient and parameter buffers: the real buffer, or the padded chunks.
  size_t buffer_size() const { return sharded ? layout.padded_size() : layout.num_elements; }
  // This rank's chunk of the padded buffers, for the ZeRO-1 collectives; throws std::logic_error
  // naming `what` unless this is a ZeRO-1 partition over exactly world_size ranks.
  ElementRange collective_chunk(int world_size, const char* what) const;
};

// Stage 0: all of n elements, whatever the number of ranks.
OptimizerPartition unsharded_partition(size_t num_elements);
// Stage 1: rank's chunk of make_zero_layout(num_elements, world_size, alignment).
OptimizerPartition zero1_partition(size_t num_elements, int world_size, int rank, size_t alignment);

// The part of one tensor that lies inside a range of the flat buffer.
struct TensorSlice {
  int tensor = 0;            // index into the tensor list
  size_t tensor_offset = 0;  // first element of the slice, counted within the tensor
  size_t range_offset = 0;   // where the slice starts, counted from range.begin
  size_t count = 0;
  bool weight_decay = false;
};

// The slices of the tensors that intersect `range`, in buffer order. Elements of the range that
// belong to no tensor (the padding) are in no slice. Tensors must be in increasing offset order
// and must not overlap; throws std::invalid_argument naming the tensor otherwise.
std::vector<TensorSlice> tensor_slices(const ParamTensor* tensors, size_t num_tensors, ElementRange range);
inline std::vector<TensorSlice> tensor_slices(const std::array<ParamTensor, kNumParamTensors>& tensors,
                                              ElementRange range) {
  return tensor_slices(tensors.data(), tensors.size(), range);
}

}  // namespace llmc
