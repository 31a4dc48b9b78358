// AdamW on a flat parameter buffer (docs/contract.md): with g = grad * grad_scale,
//   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,
//   p -= lr * (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + weight_decay * p).
#pragma once
#include <cstddef>

namespace llmc {

void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int t, float grad_scale);

}  // namespace llmc
