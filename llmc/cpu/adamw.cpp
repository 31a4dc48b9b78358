#include "llmc/cpu/adamw.h"

#include <cmath>

namespace llmc {

void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int t, float grad_scale) {
  const float correction1 = float(1.0 - std::pow(double(beta1), t));
  const float correction2 = float(1.0 - std::pow(double(beta2), t));
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float g = grads[i] * grad_scale;
    m[i] = beta1 * m[i] + (1.0f - beta1) * g;
    v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
    const float m_hat = m[i] / correction1;
    const float v_hat = v[i] / correction2;
    params[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + weight_decay * params[i]);
  }
}

}  // namespace llmc
