#include "llmc/cpu/classifier.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "llmc/cpu/fast_exp.h"

namespace llmc {

namespace {

// A row is reduced in kLanes interleaved partial results (lane j takes v = j mod kLanes of the
// whole kLanes-blocks, the remainder goes to a scalar tail), combined in a fixed order. Written with
// GCC vector types so that the reductions vectorise; the result depends on the code only, not on
// the SIMD width or the thread count.
constexpr int kLanes = 8;
typedef float floats __attribute__((vector_size(kLanes * sizeof(float))));
typedef double doubles __attribute__((vector_size(kLanes * sizeof(double))));

// Vectors go by reference: passing them by value would depend on the target's vector ABI.
void load(floats& v, const float* p) { std::memcpy(&v, p, sizeof(v)); }

double combine(const doubles& lane, double tail) {
  double s = 0.0;
  for (int j = 0; j < kLanes; ++j) s += lane[j];
  return s + tail;
}

float row_max(const float* row, int V) {
  const int body = V - V % kLanes;
  float m = row[0];
  if (body > 0) {
    floats lane, x;
    load(lane, row);
    for (int v = kLanes; v < body; v += kLanes) {
      load(x, row + v);
      lane = lane < x ? x : lane;
    }
    for (int j = 0; j < kLanes; ++j) m = std::max(m, lane[j]);
  }
  for (int v = body; v < V; ++v) m = std::max(m, row[v]);
  return m;
}

// Sum of exp(row[v] - max) over the row, in double.
double exp_sum(const float* row, int V, float max) {
  const int body = V - V % kLanes;
  doubles lane = {};
  for (int v = 0; v < body; v += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] += exp_vectorisable(double(row[v + j]) - max);
  double tail = 0.0;
  for (int v = body; v < V; ++v) tail += exp_vectorisable(double(row[v]) - max);
  return combine(lane, tail);
}

// Replaces row[v] with float(exp(row[v] - max)) and returns the sum of those floats, in double
// (so the probabilities derived from them are normalised consistently).
double exp_in_place(float* row, int V, float max) {
  for (int v = 0; v < V; ++v) row[v] = float(exp_vectorisable(double(row[v]) - max));
  const int body = V - V % kLanes;
  doubles lane = {};
  floats x;
  for (int v = 0; v < body; v += kLanes) {
    load(x, row + v);
    lane += __builtin_convertvector(x, doubles);
  }
  double tail = 0.0;
  for (int v = body; v < V; ++v) tail += row[v];
  return combine(lane, tail);
}

}  // namespace

void classifier_forward(float* losses, const float* logits, const int* targets, int N, int V, int Vp) {
// Rows are independent: dynamic scheduling lets an idle thread take rows from one that the OS
// has descheduled (the cores are shared), and cannot change any row's result.
#pragma omp parallel for schedule(dynamic, 8)
  for (int n = 0; n < N; ++n) {
    const float* row = logits + size_t(n) * Vp;
    const float max_logit = row_max(row, V);
    losses[n] = float(double(max_logit) + std::log(exp_sum(row, V, max_logit)) - row[targets[n]]);
  }
}

void classifier_forward_backward(float* losses, float* logits, const int* targets, int N, int V, int Vp,
                                 float dloss) {
#pragma omp parallel for schedule(dynamic, 8)
  for (int n = 0; n < N; ++n) {
    float* row = logits + size_t(n) * Vp;
    const int target = targets[n];
    const float max_logit = row_max(row, V);
    const float target_logit = row[target];
    // The row is overwritten with the unnormalised probabilities, then scaled.
    const double sum = exp_in_place(row, V, max_logit);
    losses[n] = float(double(max_logit) + std::log(sum) - target_logit);
    const float scale = float(dloss / sum);
    for (int v = 0; v < V; ++v) row[v] *= scale;
    row[target] -= dloss;
    std::fill(row + V, row + Vp, 0.0f);
  }
}

}  // namespace llmc
