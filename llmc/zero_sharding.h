// ZeRO-1 bookkeeping (pure functions, no communication): which contiguous part of the flat
// parameter buffer each rank owns the optimizer state of, and which parameter tensors that part
// cuts through.
//
// A flat buffer of n floats is padded to W equal chunks of shard_size floats, shard_size =
// ceil(n / W) rounded up to a multiple of `alignment`, because reduce-scatter and all-gather move
// equal-sized chunks (llmc/communicator.h). Rank r's chunk is [r*shard_size, (r+1)*shard_size) of
// the padded buffer; the part of it below n holds real parameters and is what r owns. One step:
//   reduce_scatter_sum(grads_padded, grad_shard, shard_size)   rank r: summed gradients of chunk r
//   AdamW on the owned elements, per tensor slice (weight decay is per tensor)
//   all_gather(param_shard, params_padded, shard_size)         every rank: all updated parameters
// The padding is never read as a parameter; keep it zero so that sums of squares stay exact.
#pragma once
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
