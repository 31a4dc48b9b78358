// The training loop's evaluations: validation loss (-v/-m), HellaSwag accuracy (-h) and text
// samples (-s/-g). Semantics: docs/training.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "llmc/backend.h"
#include "llmc/data/hellaswag.h"
#include "llmc/dist/communicator.h"
#include "llmc/rng.h"
#include "llmc/train/options.h"

namespace llmc {

class DataLoader;

struct EvalAccuracy {
  int64_t correct = 0, total = 0;
  double accuracy() const;  // correct / total, 0 for no examples
};
// HellaSwag-style multiple choice (-h): every completion of every example is a row of T positions
// (llmc/data/hellaswag.h), rows are packed B per batch through backend.forward_losses, and an example
// counts as correct when predict_completion picks its label. Throws if an example needs more
// than T positions.
EvalAccuracy evaluate_multiple_choice(Backend& backend, const std::vector<EvalExample>& examples, int B, int T);

// Mean loss of the first `batches` batches of `val` (a one-rank, sequential loader, rewound
// first): batch i is evaluated by rank i mod W and the sums are added over the ranks, so every
// rank gets the same figure for any number of ranks.
float validation_loss(Backend& backend, DataLoader& val, int64_t batches, int B, int T, Communicator& host);

// This rank's share of the HellaSwag examples: rank r scores examples r, r+W, r+2W, ...
struct HellaswagShare {
  std::vector<EvalExample> examples;
  size_t total = 0;  // over all the ranks
};
// Reads llm.c's eval file at `path`; throws std::runtime_error naming the file when it is missing
// or bad, and FlagError when an example needs more than seq_len positions.
HellaswagShare load_hellaswag_share(const std::string& path, int vocab_size, int seq_len, int rank, int world_size);

// evaluate_multiple_choice over every rank's share, the counts summed over the ranks.
EvalAccuracy evaluate_multiple_choice_on_ranks(Backend& backend, const HellaswagShare& share, int B, int T,
                                               Communicator& host);

// Generates o.gen_tokens tokens after <|endoftext|> (temperature o.temperature, top-k o.top_k,
// drawing from rng) and prints them decoded, or as token ids when the vocabulary files are missing.
void print_sample(Backend& backend, int vocab_size, const TrainOptions& o, Rng& rng, int step);

}  // namespace llmc
