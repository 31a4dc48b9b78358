#include "llmc/dist/zero_sharding.h"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

namespace llmc {

namespace {

void check_rank(int rank, int world_size) {
  if (rank < 0 || rank >= world_size)
    throw std::invalid_argument(fmt::format("ZeRO layout: rank {} is not a rank of {}", rank, world_size));
}

}  // namespace

ZeroLayout make_zero_layout(size_t num_elements, int world_size, size_t alignment) {
  if (world_size < 1) throw std::invalid_argument(fmt::format("ZeRO layout: world size {} < 1", world_size));
  if (alignment == 0) throw std::invalid_argument("ZeRO layout: alignment 0");
  const size_t W = size_t(world_size);
  const size_t per_rank = (num_elements + W - 1) / W;
  ZeroLayout layout;
  layout.num_elements = num_elements;
  layout.world_size = world_size;
  layout.shard_size = (per_rank + alignment - 1) / alignment * alignment;
  return layout;
}

ElementRange OptimizerPartition::collective_chunk(int world_size, const char* what) const {
  if (!sharded || layout.world_size != world_size)
    throw std::logic_error(fmt::format("{}: the backend's partition is {} over {} rank(s), the communicator has {}",
                                       what, sharded ? "ZeRO-1" : "unsharded", layout.world_size, world_size));
  return layout.chunk(rank);
}

OptimizerPartition unsharded_partition(size_t num_elements) {
  OptimizerPartition p;
  p.layout = make_zero_layout(num_elements, 1);
  return p;
}

OptimizerPartition zero1_partition(size_t num_elements, int world_size, int rank, size_t alignment) {
  OptimizerPartition p;
  p.layout = make_zero_layout(num_elements, world_size, alignment);
  check_rank(rank, world_size);
  p.rank = rank;
  p.sharded = true;
  return p;
}

ElementRange ZeroLayout::chunk(int rank) const {
  check_rank(rank, world_size);
  return {size_t(rank) * shard_size, size_t(rank + 1) * shard_size};
}

ElementRange ZeroLayout::owned(int rank) const {
  const ElementRange c = chunk(rank);
  return {std::min(c.begin, num_elements), std::min(c.end, num_elements)};
}

std::vector<TensorSlice> tensor_slices(const ParamTensor* tensors, size_t num_tensors, ElementRange range) {
  if (range.end < range.begin)
    throw std::invalid_argument(fmt::format("tensor slices: range [{}, {}) ends before it begins", range.begin, range.end));
  std::vector<TensorSlice> slices;
  size_t previous_end = 0;
  for (size_t i = 0; i < num_tensors; ++i) {
    const ParamTensor& t = tensors[i];
    if (t.offset < previous_end)
      throw std::invalid_argument(fmt::format("tensor slices: tensor {} ({}) starts at {}, inside the tensor before it",
                                              i, t.name, t.offset));
    previous_end = t.offset + t.numel;
    const ElementRange part = intersect({t.offset, t.offset + t.numel}, range);
    if (part.size() == 0) continue;
    slices.push_back({int(i), part.begin - t.offset, part.begin - range.begin, part.size(), t.weight_decay});
  }
  return slices;
}

}  // namespace llmc
