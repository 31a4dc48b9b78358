// LayerNorm over the last dimension: y = (x - mean) * rstd * w + b with the biased variance and
// rstd = 1/sqrt(var + kLayerNormEps). Statistics are accumulated in double.
#pragma once

#include "llmc/gpt2_constants.h"  // kLayerNormEps

namespace llmc {

// out, inp: N x C; mean, rstd: N (saved for the backward pass).
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C);

// With xhat = (x - mean) * rstd and g = dout * w:
//   dinp += rstd * (g - mean_c(g) - xhat * mean_c(g * xhat)),  dweight += sum_n dout * xhat,
//   dbias += sum_n dout.
// dinp is accumulated into (it is the residual stream's gradient). dweight/dbias are split over
// channels, each summed by one thread in row order.
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int N, int C);

}  // namespace llmc
