#include "llmc/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "llmc/cpu/fast_exp.h"

namespace llmc {

namespace {

// Dot products over a head's channels are summed in double in kLanes interleaved partial sums
// (combined in a fixed order, tail last): the loop vectorises, and the result does not depend on
// the SIMD width or thread count. Products of two floats are exact in double.
constexpr int kLanes = 8;
typedef float floats __attribute__((vector_size(kLanes * sizeof(float))));
typedef double doubles __attribute__((vector_size(kLanes * sizeof(double))));

double dot(const float* a, const float* b, int n) {
  const int body = n - n % kLanes;
  doubles lane = {};
  floats va, vb;
  for (int i = 0; i < body; i += kLanes) {
    std::memcpy(&va, a + i, sizeof(va));
    std::memcpy(&vb, b + i, sizeof(vb));
    lane += __builtin_convertvector(va, doubles) * __builtin_convertvector(vb, doubles);
  }
  double s = 0.0;
  for (int j = 0; j < kLanes; ++j) s += lane[j];
  for (int i = body; i < n; ++i) s += double(a[i]) * b[i];
  return s;
}

// Calls f(b, h, bh) for every (batch, head) pair, bh = b * NH + h. The pairs are independent:
// dynamic scheduling lets an idle thread take pairs from one that the OS has descheduled, and
// cannot change any result.
template <class F>
void for_each_head(int B, int NH, const F& f) {
#pragma omp parallel for schedule(dynamic, 1)
  for (int bh = 0; bh < B * NH; ++bh) f(bh / NH, bh % NH, bh);
}

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const double scale = 1.0 / std::sqrt(double(hs));
  const size_t row = size_t(3) * C;
  for_each_head(B, NH, [&](int b, int h, int bh) {
    const float* base = qkv + size_t(b) * T * row;
    std::vector<double> score(T), acc(hs);
    for (int t = 0; t < T; ++t) {
      const float* q = base + size_t(t) * row + h * hs;
      double max_score = -INFINITY;
      for (int t2 = 0; t2 <= t; ++t2) {
        score[t2] = dot(q, base + size_t(t2) * row + C + h * hs, hs) * scale;
        max_score = std::max(max_score, score[t2]);
      }
      for (int t2 = 0; t2 <= t; ++t2) score[t2] = exp_vectorisable(score[t2] - max_score);
      double sum = 0.0;
      for (int t2 = 0; t2 <= t; ++t2) sum += score[t2];
      float* a = att + (size_t(bh) * T + t) * T;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int t2 = 0; t2 < T; ++t2) {
        if (t2 > t) {
          a[t2] = 0.0f;
          continue;
        }
        const double p = score[t2] / sum;
        a[t2] = float(p);
        const float* v = base + size_t(t2) * row + 2 * C + h * hs;
        for (int i = 0; i < hs; ++i) acc[i] += p * v[i];
      }
      float* o = out + (size_t(b) * T + t) * C + h * hs;
      for (int i = 0; i < hs; ++i) o[i] = float(acc[i]);
    }
  });
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T,
                        int C, int NH) {
  const int hs = C / NH;
  const double scale = 1.0 / std::sqrt(double(hs));
  const size_t row = size_t(3) * C;
  for_each_head(B, NH, [&](int b, int h, int bh) {
    const float* base = qkv + size_t(b) * T * row;
    float* dbase = dqkv + size_t(b) * T * row;
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < 3; ++j)
        std::fill_n(dbase + size_t(t) * row + j * C + h * hs, hs, 0.0f);
    std::vector<double> datt(T), dq(hs);
    for (int t = 0; t < T; ++t) {
      const float* a = att + (size_t(bh) * T + t) * T;
      const float* d = dout + (size_t(b) * T + t) * C + h * hs;
      // Through out = att v: datt = dout . v, dv += att * dout.
      double weighted = 0.0;
      for (int t2 = 0; t2 <= t; ++t2) {
        float* dv = dbase + size_t(t2) * row + 2 * C + h * hs;
        datt[t2] = dot(d, base + size_t(t2) * row + 2 * C + h * hs, hs);
        for (int i = 0; i < hs; ++i) dv[i] += a[t2] * d[i];
        weighted += a[t2] * datt[t2];
      }
      // Through the softmax: dscore = att * (datt - sum(att * datt)); then through
      // score = scale * q . k into q and k.
      const float* q = base + size_t(t) * row + h * hs;
      std::fill(dq.begin(), dq.end(), 0.0);
      for (int t2 = 0; t2 <= t; ++t2) {
        const double dscore = a[t2] * (datt[t2] - weighted) * scale;
        const float* k = base + size_t(t2) * row + C + h * hs;
        float* dk = dbase + size_t(t2) * row + C + h * hs;
        for (int i = 0; i < hs; ++i) {
          dq[i] += dscore * k[i];
          dk[i] += float(dscore * q[i]);
        }
      }
      float* dqo = dbase + size_t(t) * row + h * hs;
      for (int i = 0; i < hs; ++i) dqo[i] = float(dq[i]);
    }
  });
}

}  // namespace llmc
