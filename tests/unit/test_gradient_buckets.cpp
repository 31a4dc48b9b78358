// Gradient buckets for communication overlapped with the backward pass (llmc/dist/gradient_buckets.h):
// they cover the gradient buffer once, in the order the backward pass finishes it, and packing,
// summing over simulated ranks and unpacking gives every rank the sums a whole-buffer collective
// gives it (values chosen so that every sum is an exact small integer).
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "llmc/backend.h"
#include "llmc/dist/communicator.h"
#include "llmc/dist/gradient_buckets.h"
#include "llmc/dist/host_bucket_sync.h"
#include "llmc/gpt2.h"

using namespace llmc;

namespace {

// 3 layers, C=16, vocabulary 40 padded to 48, 8 positions.
GPT2Config small_config() {
  GPT2Config c;
  c.max_seq_len = 8;
  c.vocab_size = 40;
  c.padded_vocab_size = 48;
  c.num_layers = 3;
  c.num_heads = 2;
  c.channels = 16;
  return c;
}

// Rank r's gradient element i before the sum: (r + 1) * (i % 7 + 1); the sum over W ranks is
// W (W + 1) / 2 * (i % 7 + 1).
float rank_value(int r, size_t i) { return float(r + 1) * float(i % 7 + 1); }
float summed_value(int W, size_t i) { return float(W * (W + 1) / 2) * float(i % 7 + 1); }

}  // namespace

TEST_CASE("gradient buckets: the last layer with lnf first, the embeddings last, every element once") {
  const GPT2Config c = small_config();
  const auto layout = param_layout(c);
  const std::vector<GradientBucket> buckets = gradient_buckets(c);
  REQUIRE(buckets.size() == 4);
  CHECK(buckets[0].name == "layer 2 + lnf");
  CHECK(buckets[1].name == "layer 1");
  CHECK(buckets[2].name == "layer 0");
  CHECK(buckets[3].name == "embeddings");
  // A layer's 12 per-layer tensors: 2C (ln1) + 3C*C + 3C (qkv) + C*C + C (attproj) + 2C (ln2)
  // + 4C*C + 4C (fc) + 4C*C + C (fcproj) = 12 C^2 + 13 C = 3072 + 208 for C = 16.
  CHECK(buckets[1].size() == 3280);
  CHECK(buckets[0].size() == 3280 + 2 * 16);
  // wte 48 x 16 and wpe 8 x 16.
  CHECK(buckets[3].size() == 48 * 16 + 8 * 16);
  CHECK(buckets[3].segments[0].begin == layout[kWte].offset);

  std::vector<int> covered(num_parameters(c), 0);
  for (const GradientBucket& b : buckets)
    for (const ElementRange& s : b.segments)
      for (size_t i = s.begin; i < s.end; ++i) ++covered[i];
  size_t once = 0;
  for (int k : covered) once += k == 1;
  CHECK(once == covered.size());
}

TEST_CASE("gradient buckets: packed all-reduce gives every rank the whole sum") {
  const GPT2Config c = small_config();
  const size_t n = num_parameters(c);
  const OptimizerPartition p = unsharded_partition(n);
  for (int W : {1, 2, 3}) {
    std::vector<std::vector<float>> grads(size_t(W), std::vector<float>(n, 0.0f));
    for (int r = 0; r < W; ++r)
      for (size_t i = 0; i < n; ++i) grads[size_t(r)][i] = rank_value(r, i);
    for (const GradientBucket& b : gradient_buckets(c)) {
      const BucketTransfer t = plan_bucket_transfer(b, p);
      CHECK_FALSE(t.reduce_scatter);
      CHECK(t.packed_size == b.size());
      std::vector<float> sum(t.packed_size, 0.0f);
      for (int r = 0; r < W; ++r)
        for (const CopySpan& s : t.pack)
          for (size_t k = 0; k < s.count; ++k) sum[s.packed_offset + k] += grads[size_t(r)][s.buffer_offset + k];
      for (int r = 0; r < W; ++r)
        for (const CopySpan& s : t.unpack)
          for (size_t k = 0; k < s.count; ++k) grads[size_t(r)][s.buffer_offset + k] = sum[s.packed_offset + k];
    }
    for (int r = 0; r < W; ++r) {
      size_t wrong = 0;
      for (size_t i = 0; i < n; ++i) wrong += grads[size_t(r)][i] != summed_value(W, i);
      CHECK_MESSAGE(wrong == 0, "W=", W, " rank ", r);
    }
  }
}

TEST_CASE("gradient buckets: packed reduce-scatter gives each rank the sums of its owned range") {
  const GPT2Config c = small_config();
  const size_t n = num_parameters(c);
  // Alignment 1 and 5 ranks cut tensors at odd places; 32 is the trainer's alignment.
  for (size_t alignment : {size_t(1), kPartitionAlignment}) {
    for (int W : {1, 2, 5}) {
      std::vector<OptimizerPartition> parts;
      for (int r = 0; r < W; ++r) parts.push_back(zero1_partition(n, W, r, alignment));
      const size_t padded = parts[0].buffer_size();
      std::vector<std::vector<float>> grads(size_t(W), std::vector<float>(padded, 0.0f));
      for (int r = 0; r < W; ++r)
        for (size_t i = 0; i < n; ++i) grads[size_t(r)][i] = rank_value(r, i);
      for (const GradientBucket& b : gradient_buckets(c)) {
        std::vector<BucketTransfer> t;
        for (int r = 0; r < W; ++r) t.push_back(plan_bucket_transfer(b, parts[size_t(r)]));
        const size_t chunk = t[0].chunk;
        for (int r = 0; r < W; ++r) {
          CHECK(t[size_t(r)].reduce_scatter);
          CHECK(t[size_t(r)].chunk == chunk);
          CHECK(t[size_t(r)].packed_size == chunk * size_t(W));
          // Rank q's parts of the bucket go to the q-th chunk of the packed buffer.
          for (const CopySpan& s : t[size_t(r)].pack) {
            const size_t q = s.packed_offset / chunk;
            CHECK(s.packed_offset + s.count <= (q + 1) * chunk);
            CHECK(s.buffer_offset >= parts[q].owned().begin);
            CHECK(s.buffer_offset + s.count <= parts[q].owned().end);
          }
        }
        // Reduce-scatter: the packed buffers summed, chunk q to rank q.
        std::vector<float> sum(t[0].packed_size, 0.0f);
        for (int r = 0; r < W; ++r) {
          std::vector<float> packed(t[size_t(r)].packed_size, 0.0f);
          for (const CopySpan& s : t[size_t(r)].pack)
            for (size_t k = 0; k < s.count; ++k) packed[s.packed_offset + k] = grads[size_t(r)][s.buffer_offset + k];
          for (size_t k = 0; k < packed.size(); ++k) sum[k] += packed[k];
        }
        for (int r = 0; r < W; ++r)
          for (const CopySpan& s : t[size_t(r)].unpack)
            for (size_t k = 0; k < s.count; ++k)
              grads[size_t(r)][s.buffer_offset + k] = sum[size_t(r) * chunk + s.packed_offset + k];
      }
      for (int r = 0; r < W; ++r) {
        const ElementRange owned = parts[size_t(r)].owned();
        size_t wrong = 0;
        for (size_t i = owned.begin; i < owned.end; ++i) wrong += grads[size_t(r)][i] != summed_value(W, i);
        CHECK_MESSAGE(wrong == 0, "alignment ", alignment, " W=", W, " rank ", r);
      }
    }
  }
}

TEST_CASE("gradient buckets: a segment outside the buffer is a logic error") {
  GradientBucket b{"bad", {{10, 30}}};
  CHECK_THROWS_AS(plan_bucket_transfer(b, unsharded_partition(20)), std::logic_error);
  CHECK_NOTHROW(plan_bucket_transfer(b, unsharded_partition(30)));
}

TEST_CASE("host bucket sync: buckets in backward order, all of them before finish") {
  const GPT2Config c = small_config();
  const size_t n = num_parameters(c);
  SingleProcessCommunicator one;
  HostBucketSync sync(c, unsharded_partition(n));
  std::vector<float> grads(n);
  for (size_t i = 0; i < n; ++i) grads[i] = rank_value(0, i);
  CHECK_THROWS_AS(sync.bucket_ready(0), std::logic_error);
  sync.begin(one, grads.data());
  CHECK_THROWS_AS(sync.bucket_ready(1), std::logic_error);
  sync.bucket_ready(0);
  CHECK_THROWS_AS(sync.finish(), std::logic_error);

  HostBucketSync full(c, zero1_partition(n, 1, 0, kPartitionAlignment));
  std::vector<float> padded(zero1_partition(n, 1, 0, kPartitionAlignment).buffer_size(), 0.0f);
  for (size_t i = 0; i < n; ++i) padded[i] = rank_value(0, i);
  full.begin(one, padded.data());
  for (int b = 0; b < c.num_layers + 1; ++b) full.bucket_ready(b);
  full.finish();
  CHECK_FALSE(full.active());
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += padded[i] != summed_value(1, i);
  CHECK(wrong == 0);
}
