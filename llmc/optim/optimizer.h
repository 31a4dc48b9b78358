// An optimizer as the loop, the checkpoints and the backends see it: a name (--optimizer), a list of
// per-parameter fp32 state tensors (AdamW: m and v) and one update per step. Which optimizers exist,
// with their hyperparameters and their CPU and CUDA code, is registered in llmc/optim/registry.h;
// the loop, the checkpoints and the backends reach them only through it.
//
// State tensors cover a rank's partition().owned() range of the flat parameter buffer: element i of
// each is the state of parameter owned().begin + i. So checkpoints and ZeRO re-sharding move every
// tensor alike, in the registration's order, without knowing what it holds.
#pragma once
#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "llmc/dist/zero_sharding.h"
#include "llmc/gpt2.h"

namespace llmc {

// What the loop gives an optimizer at each step.
struct OptimizerStep {
  float lr = 0.0f;            // the schedule's learning rate
  int t = 1;                  // 1-based step count (bias corrections)
  float grad_scale = 1.0f;    // every gradient is multiplied by this first: global norm clipping
  float weight_decay = 0.0f;  // -c, for the tensors param_layout marks weight_decay
};

// One state tensor of an optimizer: owned().size() values.
struct OptimizerTensor {
  std::string name;
  std::vector<float> values;
};

// The description the loop and the checkpoints need: which state tensors to save and restore.
struct OptimizerSpec {
  std::string name;                      // its --optimizer value
  std::vector<std::string> state_names;  // in checkpoint order
};

// The part of the parameters one update covers: n consecutive elements of one tensor (so one weight
// decay), with each state tensor at the same place. Real is what the forward pass reads: fp32 on the
// CPU, floatX on the GPU.
template <class Real>
struct OptimizerSlice {
  Real* params = nullptr;
  // Null, or the fp32 master values the update works on (the GPU's bf16 build); the update then
  // writes params from them, rounded to nearest.
  float* master = nullptr;
  const Real* grads = nullptr;
  float* const* state = nullptr;  // each state tensor's element 0 (that of owned().begin)
  size_t state_offset = 0;        // this slice's first element within the owned range
  size_t n = 0;
  float weight_decay = 0.0f;      // the step's, or 0 for a tensor param_layout does not decay

  float* state_at(size_t tensor) const { return state[tensor] + state_offset; }
};

// The slice of one part `s` of a tensor in a rank's owned range (from tensor_slices), with that
// tensor's weight decay (`weight_decay` or 0). `buffers` holds where the rank's buffers start: params
// and grads at flat element 0, master (or null) and the state tensors at the owned range's first
// element.
template <class Real>
OptimizerSlice<Real> optimizer_slice(const std::array<ParamTensor, kNumParamTensors>& layout, const TensorSlice& s,
                                     const OptimizerSlice<Real>& buffers, float weight_decay) {
  const size_t at = layout[size_t(s.tensor)].offset + s.tensor_offset;
  OptimizerSlice<Real> slice = buffers;
  slice.params += at;
  if (slice.master) slice.master += s.range_offset;
  slice.grads += at;
  slice.state_offset = s.range_offset;
  slice.n = s.count;
  slice.weight_decay = s.weight_decay ? weight_decay : 0.0f;
  return slice;
}

// A list of optimizer types (llmc/optim/registry.h), each with a static kName.
template <class... Optimizers>
struct OptimizerList {};

// Calls visit(O{}) for the optimizer O of the list whose kName is `name`; false when there is none.
template <class Visit, class... Optimizers>
bool visit_optimizer(OptimizerList<Optimizers...>, const std::string& name, Visit&& visit) {
  return ((name == Optimizers::kName && (visit(Optimizers{}), true)) || ...);
}

// The registered optimizers, the default (--optimizer's) first.
const std::vector<OptimizerSpec>& registered_optimizers();
const OptimizerSpec& default_optimizer();
// Their names, "adamw, ...", in that order.
std::string registered_optimizer_names();
// The registered optimizer called `name`; throws std::invalid_argument naming the registered ones.
const OptimizerSpec& find_optimizer(const std::string& name);

// Every state tensor of `spec` over n elements, zero: the state before the first step.
std::vector<OptimizerTensor> zero_optimizer_state(const OptimizerSpec& spec, size_t n);
// Throws std::invalid_argument, prefixed with `who`, unless `state` holds the tensors of `spec` in
// its order with n values each.
void check_optimizer_state(const OptimizerSpec& spec, const std::vector<OptimizerTensor>& state, size_t n,
                           const std::string& who);
// Throws std::invalid_argument unless step.t >= 1 (the bias corrections divide by 1 - beta^t).
void check_optimizer_step(const OptimizerStep& step);

}  // namespace llmc
