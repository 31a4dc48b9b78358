#include "llmc/data/dataloader.h"

#include <fmt/format.h>
#include <numeric>
#include <stdexcept>

namespace llmc {

namespace {

// Distinguishes the shuffle stream from other users of the same --seed (model init, sampling).
constexpr uint64_t kShuffleSeedTag = 0x53485546464C4531ull;

void permute(std::vector<int64_t>& order, int64_t n, bool shuffled, Rng& rng) {
  order.resize(size_t(n));
  std::iota(order.begin(), order.end(), int64_t(0));
  if (shuffled) shuffle(order, rng);
}

}  // namespace

DataLoader::DataLoader(const std::vector<std::string>& files, const DataLoaderConfig& config)
    : files_(files), config_(config), window_tokens_(int64_t(config.batch_size) * config.seq_len) {
  if (config.batch_size < 1 || config.seq_len < 1 || config.world_size < 1 || config.rank < 0 ||
      config.rank >= config.world_size)
    throw std::invalid_argument(fmt::format("data loader: bad shape B={} T={} rank {} of {}", config.batch_size,
                                            config.seq_len, config.rank, config.world_size));
  if (files.empty()) throw std::runtime_error("data loader: no shard files");
  const int64_t step_tokens = window_tokens_ * config.world_size;
  for (const std::string& f : files) {
    shards_.emplace_back(f, config.vocab_size);
    const int64_t n = shards_.back().num_tokens();
    if (shard_steps(shards_.size() - 1) == 0)
      throw std::runtime_error(fmt::format(
          "{}: shard of {} tokens is too small for one step: it needs at least {} tokens (B*T*ranks + 1 = {}*{}*{} + 1)",
          f, n, step_tokens + 1, config.batch_size, config.seq_len, config.world_size));
    total_tokens_ += n;
    steps_per_epoch_ += shard_steps(shards_.size() - 1);
  }
  buffer_.resize(size_t(window_tokens_ + 1));
  reset();
}

int64_t DataLoader::shard_steps(size_t shard_index) const {
  return (shards_[shard_index].num_tokens() - 1) / (window_tokens_ * config_.world_size);
}

void DataLoader::reset() {
  rng_ = Rng(config_.seed ^ kShuffleSeedTag);
  pos_ = DataLoaderPosition{};
  start_epoch();
}

void DataLoader::start_epoch() {
  pos_.epoch_rng_state = rng_.state;
  pos_.shard = 0;
  pos_.step = 0;
  permute(shard_order_, int64_t(shards_.size()), config_.shuffle, rng_);
  build_window_order();
}

void DataLoader::build_window_order() {
  const size_t shard = size_t(shard_order_[size_t(pos_.shard)]);
  permute(window_order_, shard_steps(shard) * config_.world_size, config_.shuffle, rng_);
}

void DataLoader::next_batch(int* inputs, int* targets) {
  const size_t shard = size_t(shard_order_[size_t(pos_.shard)]);
  const int64_t window = window_order_[size_t(pos_.step * config_.world_size + config_.rank)];
  shards_[shard].read(window * window_tokens_, window_tokens_ + 1, buffer_.data());
  std::copy(buffer_.begin(), buffer_.begin() + window_tokens_, inputs);
  std::copy(buffer_.begin() + 1, buffer_.end(), targets);
  if (config_.overfit_single_batch) return;
  if (++pos_.step < shard_steps(shard)) return;
  pos_.step = 0;
  if (++pos_.shard < int64_t(shards_.size())) {
    build_window_order();
    return;
  }
  ++pos_.epoch;
  start_epoch();
}

void DataLoader::restore(const DataLoaderPosition& position) {
  if (position.epoch < 0 || position.shard < 0 || position.shard >= int64_t(shards_.size()) || position.step < 0)
    throw std::runtime_error(fmt::format("data loader position (epoch {}, shard {}, step {}) does not fit {} shards",
                                         position.epoch, position.shard, position.step, shards_.size()));
  // Replays this epoch's draws: the shard order, then the window orders of the shards before.
  rng_.state = position.epoch_rng_state;
  pos_ = position;
  const int64_t shard = position.shard;
  permute(shard_order_, int64_t(shards_.size()), config_.shuffle, rng_);
  for (pos_.shard = 0; pos_.shard <= shard; ++pos_.shard) build_window_order();
  pos_.shard = shard;
  const int64_t steps = shard_steps(size_t(shard_order_[size_t(shard)]));
  if (position.step >= steps)
    throw std::runtime_error(fmt::format("data loader position: step {} is past the {} steps of shard {}",
                                         position.step, steps, files_[size_t(shard_order_[size_t(shard)])]));
}

}  // namespace llmc
