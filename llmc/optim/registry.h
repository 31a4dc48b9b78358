// The registration of every optimizer the trainers offer (--optimizer): for each, its name, its
// state tensors in checkpoint order and its hyperparameters. The backends reach an optimizer only
// through RegisteredOptimizers (visit_optimizer, llmc/optim/optimizer.h).
//
// Each entry is a type with
//   static constexpr const char* kName;                         the --optimizer value
//   static constexpr std::array<const char*, K> kStateNames;    K fp32 tensors over the owned range
// and each backend defines its update of all slices at once beside its code, for each entry O:
//   CPU (llmc/cpu/<name>.h, the oracle):
//     void optimizer_update_slices(O, const OptimizerSlice<float>& buffers, const OptimizerSlice<float>* slices,
//                                  int count, const OptimizerStep&);
//   CUDA (llmc/cuda/<name>.cuh); amax: null, or per slice where its FP8 weights' amaxes go
//   (llmc/cuda/fp8.cuh):
//     void optimizer_update_slices(O, const OptimizerSlice<floatX>& buffers, const OptimizerSlice<floatX>* slices,
//                                  int count, const OptimizerStep&, cudaStream_t, const Fp8WeightAmaxSink* amax);
// run_optimizer_step below finds it by argument-dependent lookup where the backend calls it, so
// this header includes neither backend.
// The update must be element-wise (each parameter's new value and state from its own gradient and
// state alone): ZeRO-1 cuts tensors between ranks, and a rank updates only its slices. The CUDA
// backend keeps at most two state tensors (the memory plan's kAdamM and kAdamV buffers).
#pragma once
#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include "llmc/optim/optimizer.h"

namespace llmc {

// AdamW's own hyperparameters.
struct AdamWHyper {
  float beta1;
  float beta2;
  float eps;
};

// AdamW (docs/contract.md) with llm.c's betas and eps; its weight decay is -c.
struct AdamW {
  static constexpr const char* kName = "adamw";
  static constexpr std::array<const char*, 2> kStateNames = {"m", "v"};
  static constexpr AdamWHyper kHyper = {0.9f, 0.95f, 1e-8f};
};

// Every optimizer --optimizer accepts; the first is the default.
using RegisteredOptimizers = OptimizerList<AdamW>;

// One step of the registered optimizer `name` on a rank, for both backends: checks the step, then
// calls the optimizer's optimizer_update_slices once with every part of a tensor in the owned range
// (`owned`, from tensor_slices), in buffer order (the CUDA backend's AdamW: one launch). A
// contiguous owned range holds at most one part of each tensor, so the parts fit an array of
// kNumParamTensors; `extra` is what optimizer_update_slices takes after the step (the CUDA stream
// and the amaxes' places, one per part of `owned`, or null). Allocates nothing. Throws
// std::logic_error for a name that is not registered (the backends take their optimizer from
// find_optimizer, so that would be a bug).
template <class Real, class... Extra>
void run_optimizer_step(const std::string& name, const std::array<ParamTensor, kNumParamTensors>& layout,
                        const std::vector<TensorSlice>& owned, const OptimizerSlice<Real>& buffers,
                        const OptimizerStep& step, Extra... extra) {
  check_optimizer_step(step);
  std::array<OptimizerSlice<Real>, kNumParamTensors> slices;
  if (owned.size() > slices.size())
    throw std::logic_error("optimizer step: " + std::to_string(owned.size()) + " tensor parts in the owned range");
  for (size_t i = 0; i < owned.size(); ++i) slices[i] = optimizer_slice(layout, owned[i], buffers, step.weight_decay);
  const bool found = visit_optimizer(RegisteredOptimizers{}, name, [&](auto optimizer) {
    optimizer_update_slices(optimizer, buffers, slices.data(), int(owned.size()), step, extra...);
  });
  if (!found) throw std::logic_error("optimizer step: no registered optimizer '" + name + "'");
}

}  // namespace llmc
