// AdamW on a flat fp32 parameter buffer (docs/contract.md), the oracle of llmc/cuda/adamw.cuh: with
// g = grad * grad_scale,
//   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,
//   p -= lr * (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + weight_decay * p).
// m and v are state tensors 0 and 1 of the slice (llmc/optim/registry.h names them).
#pragma once

#include "llmc/optim/optimizer.h"
#include "llmc/optim/registry.h"

namespace llmc {

void adamw_update(const OptimizerSlice<float>& slice, const OptimizerStep& step, const AdamWHyper& hyper);

// The CPU backend's AdamW (run_optimizer_step, llmc/optim/registry.h), slice by slice.
inline void optimizer_update_slices(AdamW, const OptimizerSlice<float>&, const OptimizerSlice<float>* slices, int count,
                                    const OptimizerStep& step) {
  for (int i = 0; i < count; ++i) adamw_update(slices[i], step, AdamW::kHyper);
}

}  // namespace llmc
