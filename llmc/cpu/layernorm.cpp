#include "llmc/cpu/layernorm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace llmc {

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* x = inp + size_t(n) * C;
    double sum = 0.0;
    for (int c = 0; c < C; ++c) sum += x[c];
    const double m = sum / C;
    double var = 0.0;
    for (int c = 0; c < C; ++c) var += (x[c] - m) * (x[c] - m);
    const double s = 1.0 / std::sqrt(var / C + kLayerNormEps);
    float* y = out + size_t(n) * C;
    for (int c = 0; c < C; ++c) y[c] = float((x[c] - m) * s * weight[c] + bias[c]);
    mean[n] = float(m);
    rstd[n] = float(s);
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* x = inp + size_t(n) * C;
    const float* d = dout + size_t(n) * C;
    const double m = mean[n], s = rstd[n];
    double g_mean = 0.0, gx_mean = 0.0;
    for (int c = 0; c < C; ++c) {
      const double g = double(d[c]) * weight[c];
      g_mean += g;
      gx_mean += g * (x[c] - m) * s;
    }
    g_mean /= C;
    gx_mean /= C;
    float* dx = dinp + size_t(n) * C;
    for (int c = 0; c < C; ++c) {
      const double g = double(d[c]) * weight[c];
      const double xhat = (x[c] - m) * s;
      dx[c] += float(s * (g - g_mean - xhat * gx_mean));
    }
  }
  constexpr int kChunk = 16;
  const int chunks = (C + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int ch = 0; ch < chunks; ++ch) {
    const int c0 = ch * kChunk, c1 = std::min(C, c0 + kChunk);
    double dw[kChunk] = {}, db[kChunk] = {};
    for (int n = 0; n < N; ++n) {
      const float* x = inp + size_t(n) * C;
      const float* d = dout + size_t(n) * C;
      const double m = mean[n], s = rstd[n];
      for (int c = c0; c < c1; ++c) {
        dw[c - c0] += double(d[c]) * (x[c] - m) * s;
        db[c - c0] += d[c];
      }
    }
    for (int c = c0; c < c1; ++c) {
      dweight[c] += float(dw[c - c0]);
      dbias[c] += float(db[c - c0]);
    }
  }
}

}  // namespace llmc
