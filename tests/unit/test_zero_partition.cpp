// The pure parts of multi-rank training: which optimizer state a rank keeps (-z 0 / -z 1), how a
// resumed rank assembles its moments from another rank count's state files, and how the train
// loader position carries over to another rank count.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "llmc/cpu/cpu_backend.h"
#include "llmc/dist/resharding.h"
#include "llmc/dist/zero_sharding.h"
#include "llmc/gpt2.h"

using namespace llmc;

TEST_CASE("optimizer partition: stage 0 keeps everything, stage 1 the rank's chunk of a padded buffer") {
  const OptimizerPartition whole = unsharded_partition(1003);
  CHECK_FALSE(whole.sharded);
  CHECK(whole.owned() == ElementRange{0, 1003});
  CHECK(whole.buffer_size() == 1003);
  // 1003 over 4 ranks, chunks of ceil(1003/4) = 251 rounded up to 32 = 256: padded 1024.
  size_t total = 0;
  for (int r = 0; r < 4; ++r) {
    const OptimizerPartition p = zero1_partition(1003, 4, r, 32);
    CHECK(p.sharded);
    CHECK(p.buffer_size() == 1024);
    CHECK(p.owned() == ElementRange{std::min<size_t>(256 * r, 1003), std::min<size_t>(256 * (r + 1), 1003)});
    total += p.owned().size();
  }
  CHECK(total == 1003);
  CHECK_THROWS_AS(zero1_partition(1003, 4, 4, 32), std::invalid_argument);
}

TEST_CASE("copy_overlap: moments of 3 ranks' chunks re-assembled for 2 ranks and for one") {
  const size_t n = 100;
  std::vector<float> whole(n);
  for (size_t i = 0; i < n; ++i) whole[i] = 0.5f * float(i) + 1.0f;
  // The old run: 3 ranks, chunks of 34 (the last owns 32).
  std::vector<std::vector<float>> files;
  std::vector<ElementRange> ranges;
  for (int r = 0; r < 3; ++r) {
    const ElementRange owned = make_zero_layout(n, 3).owned(r);
    ranges.push_back(owned);
    files.emplace_back(whole.begin() + owned.begin, whole.begin() + owned.end);
  }
  for (int W : {1, 2, 4}) {
    for (int r = 0; r < W; ++r) {
      const ElementRange mine = make_zero_layout(n, W, 8).owned(r);
      std::vector<float> got(mine.size(), -1.0f);
      size_t covered = 0;
      for (int f = 0; f < 3; ++f) covered += copy_overlap(files[f].data(), ranges[f], got.data(), mine);
      CAPTURE(W);
      CAPTURE(r);
      CHECK(covered == mine.size());
      CHECK(std::equal(got.begin(), got.end(), whole.begin() + mine.begin));
    }
  }
  float dst[4] = {7, 7, 7, 7};
  CHECK(copy_overlap(whole.data(), ElementRange{0, 10}, dst, ElementRange{10, 14}) == 0);  // disjoint
  CHECK(dst[0] == 7.0f);
}

TEST_CASE("rescale_loader_position: whole steps of the new rank count, sequential data only") {
  DataLoaderPosition p;
  p.epoch = 2;
  p.shard = 1;
  p.step = 6;  // 6 steps of 2 ranks = 12 windows of this shard read
  p.epoch_rng_state = 99;
  const DataLoaderPosition four = rescale_loader_position(p, 2, 4, false);
  CHECK(four.step == 3);
  CHECK(four.epoch == 2);
  CHECK(four.shard == 1);
  CHECK(four.epoch_rng_state == 99);
  CHECK(rescale_loader_position(p, 2, 1, false).step == 12);
  CHECK(rescale_loader_position(p, 2, 3, false).step == 4);
  CHECK(rescale_loader_position(p, 2, 2, true) == p);  // same ranks: anything goes
  p.step = 3;  // 6 windows: not whole steps of 4 ranks
  CHECK_THROWS_WITH_AS(rescale_loader_position(p, 2, 4, false), doctest::Contains("not a whole number of steps of 4"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(rescale_loader_position(p, 2, 1, true), doctest::Contains("-sh 1"), std::runtime_error);
}

TEST_CASE("CPU backend with a one-rank ZeRO-1 partition trains exactly like the unsharded one") {
  const GPT2Config config = config_from_descriptor("L1H2C16T8");
  const std::vector<float> init = init_parameters(config, 5);
  const size_t n = num_parameters(config);
  CpuBackend plain(config), sharded(config, zero1_partition(n, 1, 0, 32));
  SingleProcessCommunicator single;
  const std::vector<int> tokens = {1, 5, 9, 200, 7, 3, 3, 40, 8, 2, 11, 6, 90, 13, 4, 50, 60};
  OptimizerStep update;
  update.weight_decay = 0.1f;
  update.lr = 1e-2f;
  for (CpuBackend* b : {&plain, &sharded}) {
    b->set_parameters(init.data());
    for (int step = 1; step <= 3; ++step) {
      b->zero_grad();
      b->forward_backward(tokens.data(), tokens.data() + 1, 2, 8, 1.0f);
      if (b == &sharded) b->reduce_scatter_gradients(single); else b->all_reduce_gradients(single);
      const float norm = std::sqrt(b->grad_sum_of_squares(b->partition().owned()));
      update.t = step;
      update.grad_scale = norm > 1.0f ? 1.0f / norm : 1.0f;
      b->optimizer_step(update);
      if (b == &sharded) b->all_gather_parameters(single);
    }
  }
  std::vector<float> a(n), b(n);
  plain.get_parameters(a.data());
  sharded.get_parameters(b.data());
  CHECK(std::memcmp(a.data(), b.data(), n * sizeof(float)) == 0);
  CHECK(std::memcmp(a.data(), init.data(), n * sizeof(float)) != 0);  // it did train
  const std::vector<OptimizerTensor> sa = plain.get_optimizer_state(), sb = sharded.get_optimizer_state();
  CHECK(sa[0].values == sb[0].values);
  CHECK(sa[1].values == sb[1].values);
  CHECK(sharded.optimizer_state_bytes() == 2 * n * sizeof(float));
  // A partition over 3 ranks keeps a third of the state and refuses a one-rank communicator.
  CpuBackend third(config, zero1_partition(n, 3, 1, 32));
  CHECK(third.optimizer_state_bytes() == 2 * third.partition().owned().size() * sizeof(float));
  CHECK(third.partition().owned().size() * 3 >= n - 64);
  CHECK_THROWS_AS(third.reduce_scatter_gradients(single), std::logic_error);
}
