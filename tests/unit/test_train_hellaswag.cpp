// The HellaSwag eval of the training loop (-h): forward_losses against the already-tested mean
// forward_loss, and evaluate_multiple_choice against answers worked out independently.
#include <doctest/doctest.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "llmc/cpu/cpu_backend.h"
#include "llmc/data/hellaswag.h"
#include "llmc/gpt2.h"
#include "llmc/rng.h"
#include "llmc/train/evaluation.h"

namespace {

// A tiny model whose weights are scaled up so that the losses of different completions are far
// apart (at GPT-2's init scale they all sit within 1e-3 of ln(50257)).
llmc::CpuBackend make_backend() {
  llmc::GPT2Config c = llmc::config_from_descriptor("L1H2C16T32");
  llmc::CpuBackend backend(c);
  std::vector<float> p = llmc::init_parameters(c, 7);
  for (float& x : p) x *= 30.0f;
  backend.set_parameters(p.data());
  return backend;
}

std::vector<int> random_tokens(llmc::Rng& rng, int n) {
  std::vector<int> t(size_t(n), 0);
  for (int& x : t) x = int(rng.below(1000));
  return t;
}

}  // namespace

TEST_CASE("forward_losses: per position, mean equal to forward_loss, rows independent of the batch") {
  llmc::CpuBackend backend = make_backend();
  llmc::Rng rng(3);
  const int B = 3, T = 8;
  const std::vector<int> tokens = random_tokens(rng, B * T + 1);
  std::vector<float> losses(size_t(B) * T);
  backend.forward_losses(tokens.data(), tokens.data() + 1, B, T, losses.data());
  double sum = 0;
  for (float l : losses) sum += l;
  CHECK(sum / (B * T) == doctest::Approx(backend.forward_loss(tokens.data(), tokens.data() + 1, B, T)).epsilon(1e-6));
  for (int b = 0; b < B; ++b) {
    std::vector<float> row(T);
    backend.forward_losses(tokens.data() + b * T, tokens.data() + b * T + 1, 1, T, row.data());
    for (int t = 0; t < T; ++t) CHECK(row[size_t(t)] == doctest::Approx(losses[size_t(b * T + t)]).epsilon(1e-5));
    // Causality: the loss at the first position is that of a sequence of one token.
    CHECK(row[0] == doctest::Approx(backend.forward_loss(tokens.data() + b * T, tokens.data() + b * T + 1, 1, 1))
                        .epsilon(1e-5));
  }
  std::vector<int> bad(tokens.begin(), tokens.end());
  bad[2] = 50257;
  CHECK_THROWS_AS(backend.forward_losses(bad.data(), tokens.data() + 1, 1, T, losses.data()), std::invalid_argument);
}

TEST_CASE("multiple-choice eval: accuracy against answers computed one completion at a time") {
  llmc::CpuBackend backend = make_backend();
  llmc::Rng rng(11);
  // Context of one token: every position of a row predicts a completion token, so a completion's
  // mean masked loss is forward_loss of its row alone.
  const auto completion_loss = [&](const std::vector<int>& context, const std::vector<int>& completion) {
    std::vector<int> row = context;
    row.insert(row.end(), completion.begin(), completion.end());
    return backend.forward_loss(row.data(), row.data() + 1, 1, int(row.size()) - 1);
  };
  std::vector<llmc::EvalExample> examples;
  int expected_correct = 0;
  while (examples.size() < 10) {
    llmc::EvalExample ex;
    ex.index = int(examples.size());
    ex.context = random_tokens(rng, 1);
    std::vector<float> mean;
    for (int c = 0; c < 4; ++c) {
      ex.completions.push_back(random_tokens(rng, 1 + int(rng.below(4))));
      mean.push_back(completion_loss(ex.context, ex.completions.back()));
    }
    std::vector<float> sorted = mean;
    std::sort(sorted.begin(), sorted.end());
    if (sorted[1] - sorted[0] < 0.05f) continue;  // a clear winner only: float rounding cannot flip it
    const int best = int(std::min_element(mean.begin(), mean.end()) - mean.begin());
    // Even examples are labelled with the model's choice, odd ones with another completion.
    ex.label = ex.index % 2 == 0 ? best : (best + 1) % 4;
    expected_correct += ex.index % 2 == 0;
    examples.push_back(ex);
  }
  // 4 rows per example. B = 1 and 4: each example's last row fills a batch whose flush retires the
  // example, which nothing may read afterwards (make sanitize's ASan build checks that); B = 3:
  // examples straddle batches; B = 8: two examples per batch.
  for (int B : {1, 3, 4, 8}) {
    const llmc::EvalAccuracy acc = llmc::evaluate_multiple_choice(backend, examples, B, 8);
    CHECK_MESSAGE(acc.correct == expected_correct, "B=", B);
    CHECK(acc.total == 10);
    CHECK(acc.accuracy() == doctest::Approx(0.5));
  }
  CHECK_THROWS_AS(llmc::evaluate_multiple_choice(backend, examples, 2, 3), std::invalid_argument);
}
