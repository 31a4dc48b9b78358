// CudaBackend's FP8 matmuls (--fp8 1; llmc/cuda/fp8.cuh has the casts and the scaling,
// llmc/cuda/fp8_layout.h where each tensor's scale and copy lie, and docs/cuda-trainer.md "FP8
// matmuls" the design): each scaled tensor's FP8 operand, the weights' casts, the end of a
// micro-step, and the scaling state a checkpoint keeps.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "llmc/cuda/cuda_backend_impl.cuh"
#include "llmc/cuda/matmul.cuh"
#include "llmc/test_hooks.h"

namespace llmc {

namespace {

constexpr uint64_t kScalingStateMagic = 0x3253434C41385046ull;  // "FP8ALCS2"

// Clears the amax slots of tensors [first, first + count).
__global__ void fp8_clear_amax_kernel(float* state, int first, int count) {
  const int i = first + blockIdx.x * blockDim.x + threadIdx.x;
  if (i < first + count) fp8_take_amax(reinterpret_cast<unsigned*>(state + fp8_amax_offset(i)));
}

}  // namespace

// lnf's copy has a buffer of its own: every chunk of the classifier reads it, between which the
// operand buffer holds the chunk's d(logits).
__nv_fp8_storage_t* CudaBackend::Impl::fp8_data(Fp8Role role, LinearLayer linear) const {
  return role == Fp8Role::kInput && linear == LinearLayer::kLmHead ? fp8_lnf : fp8_operand;
}

Fp8Sink CudaBackend::Impl::fp8_sink(Fp8Role role, LinearLayer linear, int l) const {
  if (!opt.fp8 || !fp8_layout.scales(linear)) return {};
  const int i = fp8_layout.tensor(role, linear, l);
  Fp8Sink sink;
  sink.data = fp8_data(role, linear);
  sink.scale = fp8_state + fp8_scale_offset(i);
  sink.amax = fp8_recording ? reinterpret_cast<unsigned*>(fp8_state + fp8_amax_offset(i)) : nullptr;
  sink.format = role == Fp8Role::kGradient ? __NV_E5M2 : __NV_E4M3;
  return sink;
}

Fp8Matrix CudaBackend::Impl::fp8_operand_of(Fp8Role role, LinearLayer linear, int l) const {
  const int i = fp8_layout.tensor(role, linear, l);
  return {fp8_data(role, linear), fp8_state + fp8_scale_inv_offset(i),
          role == Fp8Role::kGradient ? __NV_E5M2 : __NV_E4M3};
}

__nv_fp8_storage_t* CudaBackend::Impl::fp8_weight_copy(LinearLayer linear, int l, bool transposed) const {
  return fp8_weights + fp8_layout.weight_copy(linear, l, transposed);
}

Fp8Matrix CudaBackend::Impl::fp8_weight(LinearLayer linear, int l, bool transposed) const {
  const int i = fp8_layout.tensor(Fp8Role::kWeight, linear, l);
  return {fp8_weight_copy(linear, l, transposed), fp8_state + fp8_scale_inv_offset(i), __NV_E4M3};
}

void CudaBackend::Impl::cast_fp8_weights() {
  if (!fp8_weights_stale) return;
  std::vector<Fp8WeightCast> weights;
  for (const LinearLayerSpec& linear : linears) {
    if (!fp8_layout.scales(linear.id)) continue;
    for (int l = 0; l < int(linear.copies(L())); ++l)
      weights.push_back({param(linear.weight, l), int(linear.out), int(linear.in),
                         fp8_layout.tensor(Fp8Role::kWeight, linear.id, l), fp8_weight_copy(linear.id, l, false),
                         fp8_weight_copy(linear.id, l, true)});
  }
  fp8_cast_weights(weights, fp8_state, fp8_layout.first(Fp8Role::kWeight), fp8_layout.tensors_per_role(), stream,
                   fp8_weight_amax_recorded);
  fp8_weights_stale = false;
  fp8_weight_amax_recorded = false;
}

std::vector<Fp8WeightAmaxSink> CudaBackend::Impl::make_fp8_adamw_sinks() const {
  if (!opt.fp8 || opt.speed.fp8_weight_amax != Fp8WeightAmax::kAdamW || owned.size() != num_params) return {};
  std::vector<Fp8WeightAmaxSink> sinks(owned_slices.size());
  for (const LinearLayerSpec& linear : linears) {
    if (!fp8_layout.scales(linear.id)) continue;
    for (size_t i = 0; i < owned_slices.size(); ++i)
      if (owned_slices[i].tensor == linear.weight)
        sinks[i] = {reinterpret_cast<unsigned*>(fp8_state + fp8_amax_offset(fp8_layout.tensor(Fp8Role::kWeight,
                                                                                               linear.id, 0))),
                    linear.out * linear.in};
  }
  return sinks;
}

void CudaBackend::Impl::drop_fp8_weight_amax() {
  if (!fp8_weight_amax_recorded) return;
  const int count = fp8_layout.tensors_per_role();
  launch<fp8_clear_amax_kernel>(ceil_div(count, 128), 128, 0, stream, fp8_state, fp8_layout.first(Fp8Role::kWeight),
                                count);
  fp8_weight_amax_recorded = false;
}

void CudaBackend::Impl::end_fp8_micro_step() {
  fp8_update_delayed(fp8_layout, fp8_state, int(fp8_micro_steps % kFp8History),
                     int(std::min<uint64_t>(fp8_micro_steps + 1, kFp8History)), stream, test_hook_fp8_stale_amax_shift());
  ++fp8_micro_steps;
}

// Bytes, little-endian: kScalingStateHeadWords uint64, [0] kScalingStateMagic [1] layers
// [2] fp8_micro_steps, then per scaled tensor in index order its scale and its kFp8History amax
// entries (fp32).
std::vector<uint8_t> CudaBackend::scaling_state() {
  Impl& d = *impl_;
  if (!d.opt.fp8) return {};
  d.outside_step();
  std::vector<float> state(d.fp8_layout.state_floats());
  CUDA_CHECK(cudaMemcpyAsync(state.data(), d.fp8_state, state.size() * sizeof(float), cudaMemcpyDeviceToHost,
                             d.stream));
  CUDA_CHECK(cudaStreamSynchronize(d.stream));
  std::vector<float> kept;
  for (int i = 0; i < d.fp8_layout.tensors(); ++i) {
    kept.push_back(state[fp8_scale_offset(i)]);
    kept.insert(kept.end(), state.begin() + fp8_history_offset(i), state.begin() + fp8_history_offset(i) + kFp8History);
  }
  const uint64_t head[kScalingStateHeadWords] = {kScalingStateMagic, uint64_t(d.L()), d.fp8_micro_steps};
  std::vector<uint8_t> bytes(sizeof head + kept.size() * sizeof(float));
  std::memcpy(bytes.data(), head, sizeof head);
  std::memcpy(bytes.data() + sizeof head, kept.data(), kept.size() * sizeof(float));
  return bytes;
}

void CudaBackend::set_scaling_state(const std::vector<uint8_t>& bytes) {
  Impl& d = *impl_;
  // Without FP8 there is nothing to scale; a checkpoint written without --fp8 1 has no state, and
  // the scales start afresh, the next micro-step calibrating them.
  if (!d.opt.fp8 || bytes.empty()) return;
  const int tensors = d.fp8_layout.tensors();
  uint64_t head[kScalingStateHeadWords] = {};
  std::vector<float> kept(size_t(tensors) * kScalingStateFloatsPerTensor);
  if (bytes.size() == sizeof head + kept.size() * sizeof(float)) {
    std::memcpy(head, bytes.data(), sizeof head);
    std::memcpy(kept.data(), bytes.data() + sizeof head, kept.size() * sizeof(float));
  }
  if (head[0] != kScalingStateMagic || head[1] != uint64_t(d.L()))
    throw std::runtime_error(fmt::format("--fp8 1: the checkpoint's {} bytes of scaling state are not the FP8 state of "
                                         "a {}-layer model with {} scaled tensors (LLMC_FP8_LM_HEAD={}: resume "
                                         "with the setting the checkpoint was written with)",
                                         bytes.size(), d.L(), tensors,
                                         d.fp8_layout.scales(LinearLayer::kLmHead) ? "on" : "off"));
  std::vector<float> state = d.fp8_layout.initial_state();
  for (int i = 0; i < tensors; ++i) {
    const float* t = kept.data() + size_t(i) * kScalingStateFloatsPerTensor;
    state[fp8_scale_offset(i)] = t[0];
    state[fp8_scale_inv_offset(i)] = 1.0f / t[0];  // exact: the scales are powers of two
    std::copy(t + 1, t + kScalingStateFloatsPerTensor, state.begin() + fp8_history_offset(i));
  }
  d.fp8_micro_steps = head[2];
  CUDA_CHECK(cudaMemcpyAsync(d.fp8_state, state.data(), state.size() * sizeof(float), cudaMemcpyHostToDevice,
                             d.stream));
  CUDA_CHECK(cudaStreamSynchronize(d.stream));
}

}  // namespace llmc
