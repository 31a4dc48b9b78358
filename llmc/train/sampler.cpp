#include "llmc/train/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace llmc {

int sample_token(const float* logits, int n, float temperature, int top_k, float coin) {
  const int best = int(std::max_element(logits, logits + n) - logits);
  if (temperature <= 0.0f) return best;
  std::vector<int> candidates(static_cast<size_t>(n));
  std::iota(candidates.begin(), candidates.end(), 0);
  if (top_k > 0 && top_k < n) {
    // The k largest logits (ties to the lower id), then back in id order so that the cumulative
    // sum below walks a fixed order whatever the selection algorithm did.
    std::nth_element(candidates.begin(), candidates.begin() + top_k, candidates.end(), [&](int a, int b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    candidates.resize(size_t(top_k));
    std::sort(candidates.begin(), candidates.end());
  }
  // exp((l - max) / temperature) <= 1 never overflows; the best logit is always a candidate.
  const double max_logit = logits[best];
  std::vector<double> weights(candidates.size());
  double total = 0.0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    weights[i] = std::exp((double(logits[candidates[i]]) - max_logit) / temperature);
    total += weights[i];
  }
  const double target = double(coin) * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    cumulative += weights[i];
    if (target < cumulative) return candidates[i];
  }
  return candidates.back();  // coin * total rounded up to the total
}

}  // namespace llmc
