#include <doctest/doctest.h>

#include <fmt/format.h>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "llmc/data/dataloader.h"
#include "llmc/data/shard.h"
#include "tests/unit/test_support.h"

using llmc::DataLoader;
using llmc::DataLoaderConfig;

namespace {

// Shard s holds the tokens s*10000 + i, so a token names its shard and its offset.
std::vector<std::string> make_shards(const std::string& name, const std::vector<int>& sizes) {
  const std::string dir = test_support::fresh_dir("build/tmp/unit_dataloader/" + name);
  std::vector<std::string> files;
  for (size_t s = 0; s < sizes.size(); ++s) {
    std::vector<uint16_t> tokens(size_t(sizes[s]));
    for (int i = 0; i < sizes[s]; ++i) tokens[size_t(i)] = uint16_t(s * 10000 + size_t(i));
    files.push_back(fmt::format("{}/shard_{:02d}.bin", dir, s));
    llmc::write_shard(files.back(), tokens.data(), tokens.size());
  }
  return files;
}

// Field by field: B, T, rank and world are all ints, and a reordered struct must not swap them.
DataLoaderConfig shape(int B, int T, int rank, int world, bool shuffle, uint64_t seed = 1) {
  DataLoaderConfig c;
  c.batch_size = B;
  c.seq_len = T;
  c.rank = rank;
  c.world_size = world;
  c.shuffle = shuffle;
  c.seed = seed;
  return c;
}

// (shard, offset) of the next window; checks that the batch is B*T+1 consecutive tokens.
std::pair<int, int> next_window(DataLoader& loader, int BT) {
  std::vector<int> in(static_cast<size_t>(BT)), out(static_cast<size_t>(BT));
  loader.next_batch(in.data(), out.data());
  for (int i = 0; i < BT; ++i) {
    REQUIRE(in[size_t(i)] == in[0] + i);
    REQUIRE(out[size_t(i)] == in[0] + i + 1);
  }
  return {in[0] / 10000, in[0] % 10000};
}

}  // namespace

TEST_CASE("dataloader: sequential order with one rank reads consecutive B*T windows") {
  const auto files = make_shards("w1", {100});
  DataLoader loader(files, shape(2, 4, 0, 1, false));
  std::vector<int> in(8), out(8);
  loader.next_batch(in.data(), out.data());
  CHECK(in == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(out == std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8});
  loader.next_batch(in.data(), out.data());
  CHECK(in[0] == 8);
  CHECK(out[7] == 16);
  CHECK(loader.steps_per_epoch() == 12);  // floor(99 / 8)
}

TEST_CASE("dataloader: sequential order with 3 ranks, shard change and epoch wrap-around") {
  // B*T = 8, W = 3: a step covers 24 tokens; shard 0 (100 tokens) holds floor(99/24) = 4 steps,
  // shard 1 (50 tokens) floor(49/24) = 2.
  const auto files = make_shards("w3", {100, 50});
  for (int r = 0; r < 3; ++r) {
    DataLoader loader(files, shape(2, 4, r, 3, false));
    CHECK(loader.steps_per_epoch() == 6);
    for (int k = 0; k < 4; ++k) CHECK(next_window(loader, 8) == std::make_pair(0, k * 24 + r * 8));
    for (int k = 0; k < 2; ++k) CHECK(next_window(loader, 8) == std::make_pair(1, k * 24 + r * 8));
    CHECK(loader.position().epoch == 1);
    CHECK(next_window(loader, 8) == std::make_pair(0, r * 8));
  }
}

TEST_CASE("dataloader: every window exactly once per epoch across the ranks, shuffled or not") {
  const auto files = make_shards("cover", {200, 130, 77});
  const int W = 3, BT = 6;
  for (bool shuffle : {false, true}) {
    std::map<std::pair<int, int>, int> seen;
    int64_t per_rank = 0;
    for (int r = 0; r < W; ++r) {
      DataLoader loader(files, shape(2, 3, r, W, shuffle, 42));
      per_rank = loader.steps_per_epoch();
      for (int64_t k = 0; k < per_rank; ++k) ++seen[next_window(loader, BT)];
      CHECK(loader.position().epoch == 1);
    }
    // floor(199/18)=11, floor(129/18)=7, floor(76/18)=4 steps of 3 windows each.
    CHECK(per_rank == 22);
    CHECK(seen.size() == size_t(22 * W));
    for (const auto& [window, count] : seen) {
      CHECK(count == 1);
      CHECK(window.second % BT == 0);
    }
    CHECK(seen.count({0, 32 * BT}) == 1);   // the last window of shard 0
    CHECK(seen.count({0, 33 * BT}) == 0);   // past the last whole step
  }
}

TEST_CASE("dataloader: shuffled order is seeded, reproducible and differs from sequential and per epoch") {
  const auto files = make_shards("shuffle", {400, 400, 400});
  const auto order = [&](bool shuffle, uint64_t seed, int count) {
    DataLoader loader(files, shape(1, 8, 0, 1, shuffle, seed));
    std::vector<std::pair<int, int>> windows;
    for (int i = 0; i < count; ++i) windows.push_back(next_window(loader, 8));
    return windows;
  };
  const int epoch = 3 * 49;  // floor(399/8) = 49 windows per shard
  const auto a = order(true, 7, 2 * epoch);
  CHECK(a == order(true, 7, 2 * epoch));
  CHECK(a != order(true, 8, 2 * epoch));
  CHECK(a != order(false, 7, 2 * epoch));
  const std::vector<std::pair<int, int>> first(a.begin(), a.begin() + epoch), second(a.begin() + epoch, a.end());
  CHECK(first != second);
  CHECK(std::set<std::pair<int, int>>(first.begin(), first.end()) ==
        std::set<std::pair<int, int>>(second.begin(), second.end()));
  // Shards are visited one at a time: the first 49 windows all come from one shard.
  for (int i = 1; i < 49; ++i) CHECK(first[size_t(i)].first == first[0].first);
}

TEST_CASE("dataloader: a restored position continues with the same batches") {
  const auto files = make_shards("restore", {300, 200, 250});
  for (bool shuffle : {false, true}) {
    for (int advance : {0, 5, 37, 80, 95}) {  // within a shard, across shards, into epoch 2
      DataLoader a(files, shape(2, 5, 1, 2, shuffle, 99));
      for (int i = 0; i < advance; ++i) next_window(a, 10);
      const llmc::DataLoaderPosition saved = a.position();
      DataLoader b(files, shape(2, 5, 1, 2, shuffle, 99));
      b.restore(saved);
      CHECK(b.position() == saved);
      for (int i = 0; i < 40; ++i) CHECK(next_window(a, 10) == next_window(b, 10));
    }
  }
}

TEST_CASE("dataloader: reset returns to the first batch; overfit repeats it") {
  const auto files = make_shards("reset", {100});
  DataLoader loader(files, shape(1, 4, 0, 1, true, 3));
  const auto first = next_window(loader, 4);
  next_window(loader, 4);
  loader.reset();
  CHECK(next_window(loader, 4) == first);

  DataLoaderConfig c = shape(1, 4, 0, 1, true, 3);
  c.overfit_single_batch = true;
  DataLoader overfit(files, c);
  for (int i = 0; i < 5; ++i) CHECK(next_window(overfit, 4) == first);
}

TEST_CASE("dataloader: a shard too small for one step is rejected with its name and the size needed") {
  const auto files = make_shards("small", {100, 24});
  // Three ranks of batches of 2x4 need 2*4*3 + 1 = 25 tokens; the second shard has 24.
  const std::string msg = test_support::thrown_message([&] { DataLoader loader(files, shape(2, 4, 0, 3, false)); });
  CHECK(msg.find(files[1]) != std::string::npos);
  CHECK(msg.find("25 tokens") != std::string::npos);
  CHECK_NOTHROW(DataLoader(files, shape(2, 4, 0, 2, false)));  // 17 tokens suffice with 2 ranks
}

TEST_CASE("dataloader: a restore position outside the shards is rejected") {
  const auto files = make_shards("badpos", {100});
  DataLoader loader(files, shape(1, 4, 0, 1, false));
  llmc::DataLoaderPosition p;
  p.shard = 1;
  CHECK_THROWS_AS(loader.restore(p), std::runtime_error);
  p.shard = 0;
  p.step = 24;  // floor(99/4) = 24 steps: 0..23
  CHECK_THROWS_AS(loader.restore(p), std::runtime_error);
}
