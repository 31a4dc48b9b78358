#include "llmc/cpu_classifier.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace llmc {

namespace {

// The row's maximum and log of the sum of exp(logit - max), in double.
void row_log_normaliser(const float* row, int V, double& max_logit, double& log_sum) {
  float m = row[0];
  for (int v = 1; v < V; ++v) m = std::max(m, row[v]);
  double sum = 0.0;
  for (int v = 0; v < V; ++v) sum += std::exp(double(row[v]) - m);
  max_logit = m;
  log_sum = std::log(sum);
}

}  // namespace

void classifier_forward(float* losses, const float* logits, const int* targets, int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* row = logits + size_t(n) * Vp;
    double max_logit, log_sum;
    row_log_normaliser(row, V, max_logit, log_sum);
    losses[n] = float(max_logit + log_sum - row[targets[n]]);
  }
}

void classifier_forward_backward(float* losses, float* logits, const int* targets, int N, int V, int Vp,
                                 float dloss) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    float* row = logits + size_t(n) * Vp;
    const int target = targets[n];
    float max_logit = row[0];
    for (int v = 1; v < V; ++v) max_logit = std::max(max_logit, row[v]);
    const float target_logit = row[target];
    // One exp per entry (in float: its 1-ulp error is far below the test bars), summed in double;
    // the row is overwritten with the unnormalised probabilities, then scaled.
    double sum = 0.0;
    for (int v = 0; v < V; ++v) {
      row[v] = std::exp(row[v] - max_logit);
      sum += row[v];
    }
    losses[n] = float(max_logit + std::log(sum) - target_logit);
    const float scale = float(dloss / sum);
    for (int v = 0; v < V; ++v) row[v] *= scale;
    row[target] -= dloss;
    std::fill(row + V, row + Vp, 0.0f);
  }
}

}  // namespace llmc
