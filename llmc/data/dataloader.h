// Streams (inputs, targets) micro-batches of B rows of T tokens out of token shards, for one rank
// of W. A shard of n tokens is cut into floor((n-1)/(W*B*T)) steps of W windows; window w holds
// the B*T+1 tokens starting at token w*B*T (inputs = the first B*T, targets = the last B*T).
// Rank r's k-th micro-batch in a shard is window order[k*W + r]: with shuffling off order is the
// identity (llm.c's order: tokens k*W*B*T + r*B*T ...), with shuffling on the shard order and
// every shard's window order are permutations drawn per epoch from a seeded Rng, the same on all
// ranks, so that across the ranks every window is read exactly once per epoch.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "llmc/data/shard.h"
#include "llmc/rng.h"

namespace llmc {

// Where a loader stands, enough to continue exactly there (saved in checkpoints).
struct DataLoaderPosition {
  int64_t epoch = 0;
  int64_t shard = 0;   // index into this epoch's shard order
  int64_t step = 0;    // steps already read in that shard
  uint64_t epoch_rng_state = 0;  // shuffle Rng state at the start of this epoch
  bool operator==(const DataLoaderPosition& o) const {
    return epoch == o.epoch && shard == o.shard && step == o.step && epoch_rng_state == o.epoch_rng_state;
  }
};

struct DataLoaderConfig {
  int batch_size = 1;   // B
  int seq_len = 1;      // T
  int rank = 0;
  int world_size = 1;   // W
  bool shuffle = false;
  uint64_t seed = 0;
  bool overfit_single_batch = false;  // every next_batch returns the first batch
  int vocab_size = kGpt2VocabSize;
};

class DataLoader {
 public:
  // Opens and checks every shard; throws std::runtime_error naming a shard too small for one
  // step (it needs W*B*T+1 tokens), or the pattern when nothing matches.
  DataLoader(const std::vector<std::string>& files, const DataLoaderConfig& config);

  // Fills B*T inputs and B*T targets with the next micro-batch and advances.
  void next_batch(int* inputs, int* targets);
  // Back to the first batch of epoch 0 (the validation loader restarts at every evaluation).
  void reset();

  DataLoaderPosition position() const { return pos_; }
  // Continues from a saved position; throws std::runtime_error if it does not fit these shards.
  void restore(const DataLoaderPosition& position);

  const std::vector<std::string>& files() const { return files_; }
  int64_t num_tokens() const { return total_tokens_; }
  // Micro-batches this rank reads per epoch.
  int64_t steps_per_epoch() const { return steps_per_epoch_; }

 private:
  void start_epoch();
  void build_window_order();
  int64_t shard_steps(size_t shard_index) const;

  std::vector<std::string> files_;
  std::vector<ShardReader> shards_;
  DataLoaderConfig config_;
  int64_t window_tokens_;
  int64_t total_tokens_ = 0;
  int64_t steps_per_epoch_ = 0;

  DataLoaderPosition pos_;
  Rng rng_;
  std::vector<int64_t> shard_order_;   // this epoch's order of shard indices
  std::vector<int64_t> window_order_;  // the current shard's window order
  std::vector<int> buffer_;
};

}  // namespace llmc
