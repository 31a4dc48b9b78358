#include "llmc/cpu/adamw.h"

#include <cmath>

namespace llmc {

void adamw_update(const OptimizerSlice<float>& slice, const OptimizerStep& step, const AdamWHyper& hyper) {
  const float beta1 = hyper.beta1, beta2 = hyper.beta2;
  const float correction1 = float(1.0 - std::pow(double(beta1), step.t));
  const float correction2 = float(1.0 - std::pow(double(beta2), step.t));
  float* params = slice.params;
  const float* grads = slice.grads;
  float* m = slice.state_at(0);
  float* v = slice.state_at(1);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < slice.n; ++i) {
    const float g = grads[i] * step.grad_scale;
    m[i] = beta1 * m[i] + (1.0f - beta1) * g;
    v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
    const float m_hat = m[i] / correction1;
    const float v_hat = v[i] / correction2;
    params[i] -= step.lr * (m_hat / (std::sqrt(v_hat) + hyper.eps) + slice.weight_decay * params[i]);
  }
}

}  // namespace llmc
