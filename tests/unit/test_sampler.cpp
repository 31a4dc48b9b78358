#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "llmc/train/sampler.h"

using llmc::sample_token;

TEST_CASE("sampler: inverse CDF over softmax(logits / temperature)") {
  // logits (0, ln 3): probabilities 1/4, 3/4.
  const std::vector<float> logits = {0.0f, std::log(3.0f)};
  CHECK(sample_token(logits.data(), 2, 1.0f, 0, 0.0f) == 0);
  CHECK(sample_token(logits.data(), 2, 1.0f, 0, 0.24f) == 0);
  CHECK(sample_token(logits.data(), 2, 1.0f, 0, 0.26f) == 1);
  CHECK(sample_token(logits.data(), 2, 1.0f, 0, 0.999f) == 1);
  // temperature 0.5 squares the odds: 1/10, 9/10.
  CHECK(sample_token(logits.data(), 2, 0.5f, 0, 0.09f) == 0);
  CHECK(sample_token(logits.data(), 2, 0.5f, 0, 0.11f) == 1);
}

TEST_CASE("sampler: greedy and top-k") {
  const std::vector<float> logits = {1.0f, 5.0f, 3.0f, 4.0f, 2.0f};
  for (float coin : {0.0f, 0.5f, 0.99f}) {
    CHECK(sample_token(logits.data(), 5, 0.0f, 0, coin) == 1);  // temperature 0 = argmax
    CHECK(sample_token(logits.data(), 5, 1.0f, 1, coin) == 1);  // top-1 = argmax
  }
  // top-2 keeps ids 1 (e^5) and 3 (e^4) in id order: P(1) = e / (e + 1) = 0.731.
  CHECK(sample_token(logits.data(), 5, 1.0f, 2, 0.70f) == 1);
  CHECK(sample_token(logits.data(), 5, 1.0f, 2, 0.76f) == 3);
  // Without top-k the cumulative sum walks ids 0..4: P(0) = e^1 / sum = 0.0117.
  CHECK(sample_token(logits.data(), 5, 1.0f, 0, 0.005f) == 0);
  CHECK(sample_token(logits.data(), 5, 1.0f, 3, 0.005f) == 1);  // id 0 is outside the top 3
}
