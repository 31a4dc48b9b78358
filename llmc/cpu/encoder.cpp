#include "llmc/cpu/encoder.h"

#include <algorithm>
#include <cstddef>

namespace llmc {

void encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T, int C) {
#pragma omp parallel for schedule(static)
  for (int bt = 0; bt < B * T; ++bt) {
    const float* e = wte + size_t(tokens[bt]) * C;
    const float* p = wpe + size_t(bt % T) * C;
    float* o = out + size_t(bt) * C;
    for (int c = 0; c < C; ++c) o[c] = e[c] + p[c];
  }
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T, int C) {
  constexpr int kChunk = 16;
  const int chunks = (C + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int ch = 0; ch < chunks; ++ch) {
    const int c0 = ch * kChunk, c1 = std::min(C, c0 + kChunk);
    for (int bt = 0; bt < B * T; ++bt) {
      const float* d = dout + size_t(bt) * C;
      float* we = dwte + size_t(tokens[bt]) * C;
      float* pe = dwpe + size_t(bt % T) * C;
      for (int c = c0; c < c1; ++c) {
        we[c] += d[c];
        pe[c] += d[c];
      }
    }
  }
}

}  // namespace llmc
