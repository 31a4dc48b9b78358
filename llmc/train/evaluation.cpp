#include "llmc/train/evaluation.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fmt/format.h>
#include <stdexcept>
#include <utility>

#include "llmc/data/dataloader.h"
#include "llmc/text/tokenizer.h"
#include "llmc/train/sampler.h"

namespace llmc {

namespace fs = std::filesystem;

double EvalAccuracy::accuracy() const { return total > 0 ? double(correct) / double(total) : 0.0; }

EvalAccuracy evaluate_multiple_choice(Backend& backend, const std::vector<EvalExample>& examples, int B, int T) {
  // Completions are rows of T positions; rows of consecutive examples are packed B to a batch
  // (the last batch padded), so an example's rows may straddle two batches.
  struct Pending {
    EvalRows rows;
    std::vector<float> losses;
    int filled = 0;
    int label = 0;
  };
  std::deque<Pending> pending;
  size_t first_pending = 0;  // example index of pending.front()
  std::vector<std::pair<size_t, int>> slots;  // (example index, row) of each filled batch row
  std::vector<int> inputs(size_t(B) * T), targets(size_t(B) * T);
  std::vector<float> losses(size_t(B) * T);
  EvalAccuracy result;
  const auto flush = [&] {
    if (slots.empty()) return;
    std::fill(inputs.begin() + slots.size() * T, inputs.end(), Tokenizer::kEndOfText);
    std::fill(targets.begin() + slots.size() * T, targets.end(), Tokenizer::kEndOfText);
    backend.forward_losses(inputs.data(), targets.data(), B, T, losses.data());
    for (size_t i = 0; i < slots.size(); ++i) {
      Pending& p = pending[slots[i].first - first_pending];
      std::copy_n(losses.begin() + i * T, T, p.losses.begin() + size_t(slots[i].second) * T);
      ++p.filled;
    }
    slots.clear();
    while (!pending.empty() && pending.front().filled == pending.front().rows.rows) {
      result.correct += predict_completion(pending.front().rows, pending.front().losses.data()) == pending.front().label;
      ++result.total;
      pending.pop_front();
      ++first_pending;
    }
  };
  for (size_t e = 0; e < examples.size(); ++e) {
    Pending p;
    p.rows = build_eval_rows(examples[e], T);
    p.losses.resize(p.rows.inputs.size());
    p.label = examples[e].label;
    pending.push_back(std::move(p));
    // A full batch is flushed before the next row goes in, not after the last one did: flush()
    // pops finished examples, and had it run after this example's last row it would free `rows`
    // while the loop still reads it. Before a row, this example has one left, so it stays.
    const EvalRows& rows = pending.back().rows;
    for (int r = 0; r < rows.rows; ++r) {
      if (slots.size() == size_t(B)) flush();
      std::copy_n(rows.inputs.begin() + size_t(r) * T, T, inputs.begin() + slots.size() * T);
      std::copy_n(rows.targets.begin() + size_t(r) * T, T, targets.begin() + slots.size() * T);
      slots.emplace_back(e, r);
    }
  }
  flush();
  return result;
}

float validation_loss(Backend& backend, DataLoader& val, int64_t batches, int B, int T, Communicator& host) {
  std::vector<int> inputs(size_t(B) * T), targets(size_t(B) * T);
  val.reset();
  double sum = 0.0;
  for (int64_t i = 0; i < batches; ++i) {
    // The loader only steps forward: every rank reads every batch and scores its own.
    val.next_batch(inputs.data(), targets.data());
    if (i % host.world_size() == host.rank()) sum += backend.forward_loss(inputs.data(), targets.data(), B, T);
  }
  return float(host.all_reduce_sum(sum) / double(batches));
}

HellaswagShare load_hellaswag_share(const std::string& path, int vocab_size, int seq_len, int rank, int world_size) {
  if (!fs::exists(path))
    throw std::runtime_error(fmt::format("{}: no such file (-h 1 needs llm.c's HellaSwag eval file; give its path "
                                         "with --hellaswag-file)", path));
  std::vector<EvalExample> all = read_eval_file(path, vocab_size);
  for (const EvalExample& example : all)
    if (eval_rows_length(example) > seq_len)
      throw FlagError(fmt::format("--hellaswag-file: {}: example {} needs {} positions, more than -t {}", path,
                                  example.index, eval_rows_length(example), seq_len));
  HellaswagShare share;
  share.total = all.size();
  for (size_t i = size_t(rank); i < all.size(); i += size_t(world_size)) share.examples.push_back(std::move(all[i]));
  return share;
}

EvalAccuracy evaluate_multiple_choice_on_ranks(Backend& backend, const HellaswagShare& share, int B, int T,
                                               Communicator& host) {
  const EvalAccuracy mine = evaluate_multiple_choice(backend, share.examples, B, T);
  EvalAccuracy all;
  all.correct = int64_t(host.all_reduce_sum(double(mine.correct)));
  all.total = int64_t(host.all_reduce_sum(double(mine.total)));
  return all;
}

void print_sample(Backend& backend, int vocab_size, const TrainOptions& o, Rng& rng, int step) {
  std::vector<int> tokens = {Tokenizer::kEndOfText};
  std::vector<float> logits(static_cast<size_t>(vocab_size));
  for (int i = 0; i < o.gen_tokens; ++i) {
    // The context is the last T tokens: the backend was sized for sequences of at most T.
    const int context = std::min<int>(int(tokens.size()), o.seq_len);
    backend.next_token_logits(tokens.data() + tokens.size() - context, context, logits.data());
    tokens.push_back(sample_token(logits.data(), vocab_size, o.temperature, o.top_k, rng.uniform()));
  }
  const std::vector<int> generated(tokens.begin() + 1, tokens.end());
  fmt::print("--- sample at step {} ---\n", step);
  const std::string encoder = default_encoder_path(), merges = default_vocab_bpe_path();
  std::string text;
  try {
    if (!fs::exists(encoder) || !fs::exists(merges)) throw std::runtime_error("vocabulary files missing");
    static const Tokenizer tokenizer(encoder, merges);
    text = tokenizer.decode(generated);
  } catch (const std::exception& e) {
    fmt::print("(cannot decode: {}; `make setup` puts the vocabulary at {} and {}; token ids:)\n", e.what(), encoder,
               merges);
    for (int id : generated) text += fmt::format("{} ", id);
  }
  fmt::print("{}\n---\n", text);
  std::fflush(stdout);
}

}  // namespace llmc
