#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "llmc/dist/zero_sharding.h"
#include "llmc/gpt2.h"

using namespace llmc;

namespace {

// A tensor that is not per layer: `numel` values at `offset`.
ParamTensor tensor(const char* name, size_t offset, size_t numel, bool weight_decay) {
  ParamTensor t{};
  t.name = name;
  t.shape = ParamShape(numel);
  t.weight_decay = weight_decay;
  t.offset = offset;
  t.numel = numel;
  return t;
}

}  // namespace

TEST_CASE("zero layout: equal chunks that cover the buffer once, padded at the end") {
  struct Case { size_t n; int W; size_t align; size_t shard; };
  // shard_size = ceil(n/W) rounded up to the alignment, worked out by hand
  for (const Case c : {Case{12, 4, 1, 3}, Case{13, 4, 1, 4}, Case{1, 4, 1, 1}, Case{3, 4, 1, 1}, Case{100, 1, 1, 100},
                       Case{100, 3, 8, 40}, Case{1003, 2, 32, 512}, Case{0, 4, 1, 0}}) {
    CAPTURE(c.n);
    CAPTURE(c.W);
    CAPTURE(c.align);
    const ZeroLayout z = make_zero_layout(c.n, c.W, c.align);
    CHECK(z.shard_size == c.shard);
    CHECK(z.padded_size() == c.shard * size_t(c.W));
    CHECK(z.padded_size() >= c.n);
    std::vector<int> owners(c.n, 0);
    for (int r = 0; r < c.W; ++r) {
      CHECK(z.chunk(r) == ElementRange{size_t(r) * c.shard, size_t(r + 1) * c.shard});
      const ElementRange o = z.owned(r);
      CHECK(o.begin <= o.end);
      CHECK(o.end <= c.n);
      for (size_t i = o.begin; i < o.end; ++i) ++owners[i];
    }
    CHECK(std::count(owners.begin(), owners.end(), 1) == std::ptrdiff_t(c.n));
  }
}

TEST_CASE("zero layout: ranks past the data own nothing") {
  const ZeroLayout z = make_zero_layout(10, 4, 8);  // chunks of 8: rank 0 owns 8, rank 1 owns 2
  CHECK(z.owned(0) == ElementRange{0, 8});
  CHECK(z.owned(1) == ElementRange{8, 10});
  CHECK(z.owned(2).size() == 0);
  CHECK(z.owned(3).size() == 0);
}

TEST_CASE("zero layout: bad arguments are rejected") {
  CHECK_THROWS_AS(make_zero_layout(10, 0), std::invalid_argument);
  CHECK_THROWS_AS(make_zero_layout(10, 2, 0), std::invalid_argument);
  const ZeroLayout z = make_zero_layout(10, 2);
  CHECK_THROWS_WITH_AS(z.owned(2), "ZeRO layout: rank 2 is not a rank of 2", std::invalid_argument);
  CHECK_THROWS_AS(z.chunk(-1), std::invalid_argument);
}

TEST_CASE("tensor slices: a range cutting through tensors") {
  // three tensors at [0,5), [5,12), [12,14); a range [3, 13)
  const ParamTensor t[] = {tensor("a", 0, 5, true), tensor("b", 5, 7, false), tensor("c", 12, 2, true)};
  const auto s = tensor_slices(t, 3, ElementRange{3, 13});
  REQUIRE(s.size() == 3);
  CHECK((s[0].tensor == 0 && s[0].tensor_offset == 3 && s[0].range_offset == 0 && s[0].count == 2 && s[0].weight_decay));
  CHECK((s[1].tensor == 1 && s[1].tensor_offset == 0 && s[1].range_offset == 2 && s[1].count == 7 && !s[1].weight_decay));
  CHECK((s[2].tensor == 2 && s[2].tensor_offset == 0 && s[2].range_offset == 9 && s[2].count == 1 && s[2].weight_decay));
  CHECK(tensor_slices(t, 3, ElementRange{14, 20}).empty());  // padding only
  CHECK(tensor_slices(t, 3, ElementRange{6, 6}).empty());
}

TEST_CASE("tensor slices: overlapping or unordered tensors are rejected") {
  const ParamTensor overlap[] = {tensor("a", 0, 5, true), tensor("b", 4, 3, false)};
  CHECK_THROWS_WITH_AS(tensor_slices(overlap, 2, ElementRange{0, 7}),
                       "tensor slices: tensor 1 (b) starts at 4, inside the tensor before it", std::invalid_argument);
  const ParamTensor t[] = {tensor("a", 0, 5, true)};
  CHECK_THROWS_AS(tensor_slices(t, 1, ElementRange{4, 2}), std::invalid_argument);
}

TEST_CASE("tensor slices over the GPT-2 layout: every parameter once, with its tensor's weight decay") {
  const GPT2Config config = config_from_descriptor("L2H2C64T32");
  const auto layout = param_layout(config);
  const size_t n = num_parameters(config);
  for (int W : {1, 2, 3, 4, 7}) {
    CAPTURE(W);
    const ZeroLayout z = make_zero_layout(n, W, 32);
    std::vector<int> seen(n, 0);
    std::vector<size_t> decayed_per_tensor(kNumParamTensors, 0), total_per_tensor(kNumParamTensors, 0);
    for (int r = 0; r < W; ++r) {
      const ElementRange chunk = z.chunk(r);
      for (const TensorSlice& s : tensor_slices(layout, chunk)) {
        const ParamTensor& t = layout[size_t(s.tensor)];
        REQUIRE(s.tensor_offset + s.count <= t.numel);
        REQUIRE(s.range_offset + s.count <= chunk.size());
        // the slice's buffer position, computed both ways
        REQUIRE(chunk.begin + s.range_offset == t.offset + s.tensor_offset);
        for (size_t i = 0; i < s.count; ++i) ++seen[chunk.begin + s.range_offset + i];
        total_per_tensor[size_t(s.tensor)] += s.count;
        if (s.weight_decay) decayed_per_tensor[size_t(s.tensor)] += s.count;
      }
    }
    CHECK(std::count(seen.begin(), seen.end(), 1) == std::ptrdiff_t(n));
    for (int i = 0; i < kNumParamTensors; ++i) {
      CHECK(total_per_tensor[size_t(i)] == layout[size_t(i)].numel);
      const bool decayed = i == kWte || i == kWpe || i == kQkvw || i == kAttprojw || i == kFcw || i == kFcprojw;
      CHECK(decayed_per_tensor[size_t(i)] == (decayed ? layout[size_t(i)].numel : 0));
    }
  }
}
