// Gradient buckets for communication overlapped with the backward pass (llmc/dist/gradient_buckets.h):
// they cover the gradient buffer once, in the order the backward pass finishes it, and packing,
// summing over simulated ranks and unpacking gives every rank the sums a whole-buffer collective
// gives it (values chosen so that every sum is an exact small integer), with ZeRO-1 sending each
// element once.
#include <doctest/doctest.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "llmc/backend.h"
#include "llmc/dist/communicator.h"
#include "llmc/dist/gradient_buckets.h"
#include "llmc/dist/host_bucket_sync.h"
#include "llmc/gpt2.h"
#include "tests/unit/test_support.h"

using namespace llmc;

namespace {

// 3 layers, C=16, vocabulary 40 padded to 48, 8 positions.
GPT2Config small_config() {
  GPT2Config c = test_support::two_layer_config(16, 8, 40, 48);
  c.num_layers = 3;
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

namespace {

// Runs one bucket's messages over W simulated ranks with the semantics of the communicator's
// non-blocking sums: pack, then per message the sum over the ranks written to every rank's buffer
// (all-reduce) or to the root's only (reduce), then unpack.
void simulate(const GradientBucket& bucket, const std::vector<OptimizerPartition>& parts,
              std::vector<std::vector<float>>& grads) {
  const size_t W = parts.size();
  std::vector<BucketTransfer> t;
  for (const OptimizerPartition& p : parts) t.push_back(plan_bucket_transfer(bucket, p));
  std::vector<std::vector<float>> staging(W);
  for (size_t r = 0; r < W; ++r) {
    staging[r].assign(t[r].staging, 0.0f);
    for (const CopySpan& s : t[r].pack)
      for (size_t k = 0; k < s.count; ++k) staging[r][s.packed_offset + k] = grads[r][s.buffer_offset + k];
  }
  for (size_t i = 0; i < t[0].messages.size(); ++i) {
    auto buffer = [&](size_t r) { return t[r].messages[i].buffer(grads[r].data(), staging[r].data()); };
    const BucketMessage& m = t[0].messages[i];
    std::vector<float> sum(m.count, 0.0f);
    for (size_t r = 0; r < W; ++r) {
      REQUIRE(t[r].messages[i].root == m.root);
      REQUIRE(t[r].messages[i].count == m.count);
      for (size_t k = 0; k < m.count; ++k) sum[k] += buffer(r)[k];
    }
    for (size_t r = 0; r < W; ++r)
      if (m.root < 0 || size_t(m.root) == r) std::copy(sum.begin(), sum.end(), buffer(r));
  }
  for (size_t r = 0; r < W; ++r)
    for (const CopySpan& s : t[r].unpack)
      for (size_t k = 0; k < s.count; ++k) grads[r][s.buffer_offset + k] = staging[r][s.packed_offset + k];
}

}  // namespace

TEST_CASE("gradient buckets: one all-reduce per bucket gives every rank the whole sum") {
  const GPT2Config c = small_config();
  const size_t n = num_parameters(c);
  for (int W : {1, 2, 3}) {
    const std::vector<OptimizerPartition> parts(size_t(W), unsharded_partition(n));
    std::vector<std::vector<float>> grads(size_t(W), std::vector<float>(n, 0.0f));
    for (int r = 0; r < W; ++r)
      for (size_t i = 0; i < n; ++i) grads[size_t(r)][i] = rank_value(r, i);
    for (const GradientBucket& b : gradient_buckets(c)) {
      const BucketTransfer t = plan_bucket_transfer(b, parts[0]);
      REQUIRE(t.messages.size() == 1);
      CHECK(t.messages[0].root == -1);
      CHECK(t.messages[0].count == b.size());
      // The embeddings (wte then wpe) are one range of the buffer: summed in place.
      CHECK(t.staging == (b.name == "embeddings" ? 0 : b.size()));
      simulate(b, parts, grads);
    }
    for (int r = 0; r < W; ++r) {
      size_t wrong = 0;
      for (size_t i = 0; i < n; ++i) wrong += grads[size_t(r)][i] != summed_value(W, i);
      CHECK_MESSAGE(wrong == 0, "W=", W, " rank ", r);
    }
  }
}

TEST_CASE("gradient buckets: ZeRO-1 reduces give each owner the sums of its range, each element sent once") {
  const GPT2Config c = small_config();
  const size_t n = num_parameters(c);
  // Alignment 1 and 5 ranks cut tensors at odd places; 32 is the trainer's alignment.
  for (size_t alignment : {size_t(1), kPartitionAlignment}) {
    for (int W : {1, 2, 5}) {
      std::vector<OptimizerPartition> parts;
      for (int r = 0; r < W; ++r) parts.push_back(zero1_partition(n, W, r, alignment));
      std::vector<std::vector<float>> grads(size_t(W), std::vector<float>(parts[0].buffer_size(), 0.0f));
      for (int r = 0; r < W; ++r)
        for (size_t i = 0; i < n; ++i) grads[size_t(r)][i] = rank_value(r, i);
      for (const GradientBucket& b : gradient_buckets(c)) {
        const BucketTransfer t = plan_bucket_transfer(b, parts[0]);
        size_t sent = 0;
        for (const BucketMessage& m : t.messages) {
          CHECK(m.root >= 0);
          for (const CopySpan& s : m.spans) {
            CHECK(s.buffer_offset >= parts[size_t(m.root)].owned().begin);
            CHECK(s.buffer_offset + s.count <= parts[size_t(m.root)].owned().end);
          }
          sent += m.count;
        }
        CHECK(sent == b.size());
        CHECK(t.staging <= b.size());
        simulate(b, parts, grads);
      }
      for (int r = 0; r < W; ++r) {
        const ElementRange owned = parts[size_t(r)].owned();
        size_t wrong = 0;
        for (size_t i = 0; i < n; ++i)
          wrong += grads[size_t(r)][i] != (i >= owned.begin && i < owned.end ? summed_value(W, i) : rank_value(r, i));
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

  // One rank: the sum is the value itself, so this shows every element survives packing and
  // unpacking through the staging; the sums over several ranks are the simulations' above.
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
