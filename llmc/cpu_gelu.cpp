#include "llmc/cpu_gelu.h"

#include <cmath>

namespace llmc {

namespace {
const double kSqrt2OverPi = std::sqrt(2.0 / M_PI);
constexpr double kCubic = 0.044715;
}  // namespace

void gelu_forward(float* out, const float* inp, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const double x = inp[i];
    out[i] = float(0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x))));
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
  // With u = sqrt(2/pi)(x + 0.044715 x^3): d/dx [0.5 x (1 + tanh u)]
  //   = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const double x = inp[i];
    const double th = std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x));
    const double grad = 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * kSqrt2OverPi * (1.0 + 3.0 * kCubic * x * x);
    dinp[i] = float(grad * dout[i]);
  }
}

}  // namespace llmc
