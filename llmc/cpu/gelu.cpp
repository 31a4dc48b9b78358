#include "llmc/cpu/gelu.h"

#include <cmath>

#include "llmc/cpu/fast_exp.h"
#include "llmc/gpt2_constants.h"

namespace llmc {

namespace {
// With u = sqrt(2/pi)(x + 0.044715 x^3): 0.5 (1 + tanh u) = 1 / (1 + e) with e = exp(-2u). This
// form needs one exponential, which vectorises (std::tanh does not), and never subtracts nearly
// equal numbers: 1 - s = e s.
inline double gelu_exp(double x) {
  return exp_vectorisable(-2.0 * kGeluSqrt2OverPi * (x + kGeluCubic * x * x * x));
}
}  // namespace

void gelu_forward(float* out, const float* inp, size_t n) {
// Elementwise, so dynamic scheduling (which balances threads on shared cores) changes no result.
#pragma omp parallel for schedule(dynamic, 16384)
  for (size_t i = 0; i < n; ++i) {
    const double x = inp[i];
    out[i] = float(x / (1.0 + gelu_exp(x)));
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
  // d/dx [x s(x)] with s = 0.5 (1 + tanh u) = s + x s'(x), and s' = 0.5 (1 - tanh^2 u) u'
  // = 2 s (1 - s) u' with u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
#pragma omp parallel for schedule(dynamic, 16384)
  for (size_t i = 0; i < n; ++i) {
    const double x = inp[i];
    const double e = gelu_exp(x), s = 1.0 / (1.0 + e);
    const double grad = s + 2.0 * x * s * (e * s) * kGeluSqrt2OverPi * (1.0 + 3.0 * kGeluCubic * x * x);
    dinp[i] = float(grad * dout[i]);
  }
}

}  // namespace llmc
